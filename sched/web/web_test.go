package web_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched"
	"github.com/troupe-hpc/troupe/sched/web"
)

// joinToken is the test controller's cluster join token.
const joinToken = "trp_join-token-of-the-test"

// schedd is a real controller (raft on disk, scheduling loop running)
// with the web listener in front of its read-only API, as schedd
// --web-addr serves it; api is its full API, as the trusted socket
// serves it, for setting up a scene.
func schedd(t *testing.T) (srv *sched.Server, page, full string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := sched.Open(ctx, sched.Config{DataDir: t.TempDir(), JoinToken: joinToken, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	ws := httptest.NewServer(web.Handler(srv, web.Output{}))
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ws.Close(); hs.Close(); cancel(); <-done; srv.Close() })
	return srv, ws.URL, hs.URL
}

// submit submits a job as uid (its command, environment and directory
// are the secrets an anonymous viewer must not see).
func submit(t *testing.T, srv *sched.Server, uid int, name string, size int, cpu float64) uint64 {
	t.Helper()
	res, err := srv.Submit(context.Background(), api.SubmitRequest{
		Spec: wire.ToAPI(jobspec.Job{Name: name, Image: "host", Command: []string{"secret-command", "--flag"},
			Env:       map[string]string{"API_KEY": "hunter2"},
			Cluster:   jobspec.Cluster{Size: size, Mode: "multi-node"},
			Resources: jobspec.Resources{CPU: cpu, Memory: 1 << 30}}),
		Cwd: "/home/user" + strconv.Itoa(uid) + "/private", UID: uid, GID: uid, User: "user" + strconv.Itoa(uid)})
	if err != nil {
		t.Fatal(err)
	}
	return res.JobID
}

func register(t *testing.T, srv *sched.Server, name string, cpus int64, labels ...string) {
	t.Helper()
	_, err := srv.Register(context.Background(), api.NodeRegister{Name: name, Addr: "10.0.0." + strconv.Itoa(len(name)),
		Capacity: api.Resources{CPUMilli: cpus * 1000, Memory: 16 << 30}, Runtime: "process", Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
}

func do(t *testing.T, method, url string, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestPageIsServed(t *testing.T) {
	_, page, _ := schedd(t)
	for path, typ := range map[string]string{"/": "text/html", "/app.js": "text/javascript", "/style.css": "text/css"} {
		code, h, body := do(t, "GET", page+path, "")
		if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), typ) || len(body) < 100 {
			t.Errorf("GET %s: %d %q, %d bytes", path, code, h.Get("Content-Type"), len(body))
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
	// No asset from elsewhere: the page works on a site without internet.
	for _, path := range []string{"/", "/app.js", "/style.css"} {
		_, _, body := do(t, "GET", page+path, "")
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") || strings.Contains(body, "//cdn") {
			t.Errorf("%s refers to another site", path)
		}
	}
	if code, _, _ := do(t, "GET", page+"/nope", ""); code != 404 {
		t.Errorf("GET /nope: %d, want 404", code)
	}
}

// The listener is unauthenticated: nothing on it may change the state or
// hand out secrets.
func TestReadOnly(t *testing.T) {
	srv, page, _ := schedd(t)
	id := submit(t, srv, 1000, "mine", 1, 1)
	job := strconv.FormatUint(id, 10)
	submitBody := `{"spec":{"name":"evil","image":"host","command":["true"],"cluster":{"size":1},"resources":{"cpu":1,"memory":1073741824}},"uid":0,"gid":0}`
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/jobs", submitBody},
		{"POST", "/v1/jobs/" + job + "/kill", ""},
		{"POST", "/v1/jobs/" + job + "/hold", ""},
		{"POST", "/v1/nodes/register", `{"name":"evil","addr":"1.2.3.4","capacity":{"cpu_milli":1000,"memory":1}}`},
		{"POST", "/v1/snapshot", "junk"},
		{"POST", "/v1/reconfig", ""},
		{"POST", "/v1/tokens", `{}`},
		{"PUT", "/v1/jobs", submitBody},
		{"DELETE", "/v1/jobs/" + job, ""},
		{"PATCH", "/", ""},
	} {
		code, h, body := do(t, c.method, page+c.path, c.body)
		if code != http.StatusMethodNotAllowed || h.Get("Allow") != "GET, HEAD" || !strings.Contains(body, "read-only") {
			t.Errorf("%s %s: %d (Allow %q) %s; want 405 read-only", c.method, c.path, code, h.Get("Allow"), body)
		}
	}
	for _, path := range []string{"/v1/snapshot", "/v1/tokens", "/v1/nodes/n1/assignments", "/v1/raft/join", "/metrics"} {
		if code, _, body := do(t, "GET", page+path, ""); code != http.StatusNotFound {
			t.Errorf("GET %s: %d %s; want 404", path, code, body)
		}
	}
	v := srv.Store().Snapshot()
	if n := len(v.Jobs()); n != 1 {
		t.Errorf("%d jobs after the refused requests, want 1", n)
	}
	if j := v.Job(id); j.KillWanted || j.State != api.JobPending {
		t.Errorf("job %d was touched: %s kill_wanted=%v", id, j.State, j.KillWanted)
	}
	if len(v.Nodes()) != 0 {
		t.Errorf("a node registered through the web listener")
	}
}

// Everyone is an anonymous non-owner there: other users' commands,
// environments and directories are hidden, as bjob hides them.
func TestAnonymousSeesRedacted(t *testing.T) {
	srv, page, full := schedd(t)
	id := submit(t, srv, 1000, "alice-job", 1, 1)
	root := submit(t, srv, 0, "root-job", 1, 1)
	// uid -1 is the anonymous viewer's own: it must not make it an owner.
	minus := submit(t, srv, -1, "minus-job", 1, 1)
	secrets := []string{"secret-command", "hunter2", "API_KEY", "/private"}
	for _, path := range []string{"/v1/jobs", "/v1/jobs/" + strconv.FormatUint(id, 10), "/v1/jobs/" + strconv.FormatUint(root, 10),
		"/v1/jobs/" + strconv.FormatUint(minus, 10)} {
		code, _, body := do(t, "GET", page+path, "")
		if code != 200 || !strings.Contains(body, "-job") {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("GET %s on the web listener shows %q: %s", path, s, body)
			}
		}
		// The trusted socket shows them: the test would see a leak.
		_, _, body = do(t, "GET", full+path, "")
		if !strings.Contains(body, "secret-command") || !strings.Contains(body, "hunter2") {
			t.Errorf("GET %s on the full API lacks the secrets the test looks for", path)
		}
	}
	var list api.JobList
	_, _, body := do(t, "GET", page+"/v1/jobs", "")
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	for _, j := range list.Jobs {
		if j.User == "" || j.Name == "" || j.State == "" {
			t.Errorf("job %d lost what the queue shows: %+v", j.ID, j)
		}
	}
}

// The page's live refresh rests on blocking queries through the web
// listener: they wait for a change and carry the new index.
func TestBlockingQuery(t *testing.T) {
	srv, page, _ := schedd(t)
	submit(t, srv, 1000, "first", 1, 1)
	_, h, _ := do(t, "GET", page+"/v1/jobs", "")
	idx, err := strconv.ParseUint(h.Get(api.IndexHeader), 10, 64)
	if err != nil || idx == 0 {
		t.Fatalf("%s = %q", api.IndexHeader, h.Get(api.IndexHeader))
	}
	go func() {
		// The submission comes after the query started: that the query
		// waits for it is what is tested.
		time.Sleep(300 * time.Millisecond)
		submit(t, srv, 1000, "second", 1, 1)
	}()
	start := time.Now()
	for {
		code, h, body := do(t, "GET", page+"/v1/jobs?index="+strconv.FormatUint(idx, 10)+"&wait=10s", "")
		next, _ := strconv.ParseUint(h.Get(api.IndexHeader), 10, 64)
		if code != 200 || next <= idx {
			t.Fatalf("blocking query at index %d: %d, index %d: %s", idx, code, next, body)
		}
		idx = next
		if strings.Contains(body, `"second"`) {
			break
		}
		if time.Since(start) > 9*time.Second {
			t.Fatal("the submission never showed")
		}
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Errorf("saw the submission after %v, before it was made", waited)
	}
	// Once the scheduler has settled (it may still write the second
	// job's pending reason), a query at the current index waits its
	// whole wait and answers the same index.
	var waited time.Duration
	if !eventually.Within(10*time.Second, func() bool {
		_, h, _ = do(t, "GET", page+"/v1/jobs", "")
		idx, _ = strconv.ParseUint(h.Get(api.IndexHeader), 10, 64)
		start = time.Now()
		_, h, _ = do(t, "GET", page+"/v1/jobs?index="+strconv.FormatUint(idx, 10)+"&wait=400ms", "")
		waited = time.Since(start)
		return waited >= 350*time.Millisecond && h.Get(api.IndexHeader) == strconv.FormatUint(idx, 10)
	}) {
		t.Errorf("a query at the current index %d came back after %v with index %s", idx, waited, h.Get(api.IndexHeader))
	}
}

// The page shows the reservations: anyone reads them on the listener,
// and the page has a timeline for them.
func TestReservationsOnPage(t *testing.T) {
	srv, page, _ := schedd(t)
	register(t, srv, "n1", 4)
	start := time.Now().Add(time.Hour).Truncate(time.Second)
	if _, err := srv.CreateReservation(context.Background(), api.ReservationRequest{Name: "pm", Start: start, Duration: 4 * time.Hour,
		Nodes: []string{"n1"}, Flags: []string{api.FlagMaint}}, "root"); err != nil {
		t.Fatal(err)
	}
	code, _, body := do(t, "GET", page+"/v1/reservations", "")
	var l api.ReservationList
	if code != 200 || json.Unmarshal([]byte(body), &l) != nil || len(l.Reservations) != 1 || l.Reservations[0].Name != "pm" ||
		!l.Reservations[0].Start.Equal(start) || l.Reservations[0].State != api.ResvInactive {
		t.Fatalf("GET /v1/reservations: %d %s", code, body)
	}
	if code, _, _ := do(t, "POST", page+"/v1/reservations", `{"name":"x"}`); code < 400 {
		t.Errorf("anonymous POST /v1/reservations: %d", code)
	}
	_, _, html := do(t, "GET", page+"/", "")
	_, _, js := do(t, "GET", page+"/app.js", "")
	if !strings.Contains(html, `id="reservations"`) || !strings.Contains(js, "/v1/reservations") {
		t.Error("the page has no reservations timeline")
	}
}
