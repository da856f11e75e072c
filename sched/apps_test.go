package sched

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// appBackend is a service: it answers what it was asked (path, prefix,
// whether it saw an Authorization), redirects /away to /elsewhere, and
// on an Upgrade to /ws echoes raw bytes back.
func appBackend(t testing.TB) *httptest.Server {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/away":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		case r.URL.Path == "/ws" && r.Header.Get("Upgrade") == "websocket":
			c, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
			_ = brw.Flush()
			for {
				line, err := brw.ReadString('\n')
				if err != nil {
					return
				}
				_, _ = brw.WriteString("echo " + line)
				_ = brw.Flush()
			}
		default:
			fmt.Fprintf(w, "path=%s prefix=%s auth=%q host=%s", r.URL.RequestURI(), r.Header.Get("X-Forwarded-Prefix"), r.Header.Get("Authorization"), r.Host)
		}
	}))
	t.Cleanup(hs.Close)
	return hs
}

// fakeNodelet answers node's app requests as the nodelet would, dialing
// the port on this host's loopback, and records them.
type fakeNodelet struct {
	mu   sync.Mutex
	seen []api.AttachRequest
}

func (f *fakeNodelet) run(ctx context.Context, c *client.Client, node string) {
	for ctx.Err() == nil {
		rs, err := c.AttachRequests(ctx, node, time.Second)
		if err != nil {
			continue
		}
		for _, r := range rs.Requests {
			f.mu.Lock()
			f.seen = append(f.seen, r)
			f.mu.Unlock()
			go func() {
				app, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", r.Port))
				stream, cerr := c.AttachConnect(ctx, node, r.ID)
				if cerr != nil {
					return
				}
				if err != nil {
					fmt.Fprintf(stream, "error: %v\n", err)
					stream.Close()
					return
				}
				_, _ = io.WriteString(stream, api.AppReady)
				attach.Splice(stream, app)
			}()
		}
	}
}

func (f *fakeNodelet) requests() []api.AttachRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.AttachRequest(nil), f.seen...)
}

// TestAppProxy: /apps/JOB/SERVICE/ reaches the service's port through
// the nodelet of main1, for the job's owner and admins only, with the
// prefix stripped (and put back on redirects), without the caller's
// Authorization, and carries a WebSocket upgrade both ways.
func TestAppProxy(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, c := cluster(t)
	register(t, c, "n1", 4)
	backend := appBackend(t)
	port := backend.Listener.Addr().(*net.TCPAddr).Port
	users := map[string]auth.Identity{
		"alice": {UID: 1001, GID: 1001, User: "alice"},
		"bob":   {UID: 1002, GID: 1002, User: "bob"},
		"root":  {UID: 0, GID: 0, User: "root", Admin: true},
	}
	// The front: the user named by X-Test-User, as the socket would say.
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.Handler().ServeHTTP(w, r.WithContext(auth.WithIdentity(r.Context(), users[r.Header.Get("X-Test-User")])))
	}))
	defer front.Close()
	nl := &fakeNodelet{}
	go nl.run(ctx, c, "n1")

	sp := spec(1, jobspec.ModeSingleNode, 1)
	sp.Services = []jobspec.Service{{Name: "web", Port: port, Protocol: jobspec.ProtocolHTTP}}
	code, body := as(srv, users["alice"], "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(sp)})
	if code != http.StatusCreated {
		t.Fatalf("submit: %d %s", code, body)
	}
	var res api.SubmitResponse
	_ = json.Unmarshal(body, &res)
	id := res.JobID
	get := func(user, path string) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest("GET", front.URL+path, nil)
		req.Header.Set("X-Test-User", user)
		req.Header.Set("Authorization", "Bearer alice-secret")
		cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	prefix := fmt.Sprintf("/apps/%d/web", id)

	waitJob(t, c, id, func(j api.Job) bool { return j.State == api.JobScheduled })
	if code, body, _ := get("alice", prefix+"/"); code != http.StatusConflict {
		t.Errorf("before main1 runs: %d %s, want 409", code, body)
	}
	if err := c.Report(ctx, "n1", api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: id, Host: "main1", State: api.ContainerRunning}}}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, id, func(j api.Job) bool { return j.State == api.JobRunning })

	code, got, _ := get("alice", prefix+"/hello?q=1")
	want := fmt.Sprintf("path=/hello?q=1 prefix=%s auth=\"\" host=%s", prefix, strings.TrimPrefix(front.URL, "http://"))
	if code != http.StatusOK || got != want {
		t.Fatalf("alice: %d %q, want 200 %q", code, got, want)
	}
	if code, body, _ := get("root", prefix+"/"); code != http.StatusOK || !strings.HasPrefix(body, "path=/ ") {
		t.Errorf("an admin: %d %q, want 200 path=/", code, body)
	}
	if code, body, _ := get("bob", prefix+"/"); code != http.StatusForbidden {
		t.Errorf("bob: %d %s, want 403", code, body)
	}
	if code, body, _ := get("alice", fmt.Sprintf("/apps/%d/ssh/", id)); code != http.StatusNotFound || !strings.Contains(body, "declares web") {
		t.Errorf("an undeclared service: %d %s, want 404 naming web", code, body)
	}
	if code, _, h := get("alice", prefix+"?a=b"); code != http.StatusPermanentRedirect || h.Get("Location") != prefix+"/?a=b" {
		t.Errorf("without the slash: %d Location %q, want 308 to %s/?a=b", code, h.Get("Location"), prefix)
	}
	if code, _, h := get("alice", prefix+"/away"); code != http.StatusFound || h.Get("Location") != prefix+"/elsewhere" {
		t.Errorf("the app's redirect: %d Location %q, want %s/elsewhere", code, h.Get("Location"), prefix)
	}
	for _, r := range nl.requests() {
		if r.JobID != id || r.Host != "main1" || r.Port != port || r.Run != 0 {
			t.Errorf("nodelet asked %+v, want job %d main1 port %d", r, id, port)
		}
	}
	if len(nl.requests()) == 0 {
		t.Fatal("the nodelet was never asked")
	}

	// WebSocket: the upgrade goes through and bytes flow both ways.
	conn, err := net.Dial("tcp", strings.TrimPrefix(front.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET %s/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nX-Test-User: alice\r\n\r\n", prefix)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	for _, msg := range []string{"one\n", "two\n"} {
		_, _ = io.WriteString(conn, msg)
		got, err := br.ReadString('\n')
		if err != nil || got != "echo "+msg {
			t.Fatalf("through the upgraded stream: %q %v, want %q", got, err, "echo "+msg)
		}
	}

	// A nodelet that cannot reach the port says why: 502.
	backend.Close()
	srv.appTransport().CloseIdleConnections()
	if code, body, _ := get("alice", prefix+"/"); code != http.StatusBadGateway || !strings.Contains(body, "refused") {
		t.Errorf("service down: %d %s, want 502 naming the refusal", code, body)
	}
}

// BenchmarkAppProxy: one GET through /apps, the nodelet's stream to the
// app kept between requests (pooled), or opened for each (fresh: the
// attach round trip through the nodelet's long-poll each time).
func BenchmarkAppProxy(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, c := cluster(b)
	register(b, c, "n1", 4)
	backend := appBackend(b)
	go (&fakeNodelet{}).run(ctx, c, "n1")
	sp := spec(1, jobspec.ModeSingleNode, 1)
	sp.Services = []jobspec.Service{{Name: "web", Port: backend.Listener.Addr().(*net.TCPAddr).Port}}
	res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(sp)})
	if err != nil {
		b.Fatal(err)
	}
	waitJob(b, c, res.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	if err := c.Report(ctx, "n1", api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: res.JobID, Host: "main1", State: api.ContainerRunning}}}); err != nil {
		b.Fatal(err)
	}
	waitJob(b, c, res.JobID, func(j api.Job) bool { return j.State == api.JobRunning })
	front := httptest.NewServer(srv.Handler())
	defer front.Close()
	url := fmt.Sprintf("%s/apps/%d/web/x", front.URL, res.JobID)
	for _, fresh := range []bool{false, true} {
		name := "pooled"
		if fresh {
			name = "fresh"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if fresh {
					srv.appTransport().CloseIdleConnections()
				}
				resp, err := http.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("GET: %s", resp.Status)
				}
			}
		})
	}
}
