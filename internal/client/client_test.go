package client

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/freeport"
	"github.com/troupe-hpc/troupe/jobspec"
)

// fast shortens the per-try deadlines for the test.
func fast(t *testing.T) {
	t.Helper()
	old, oldPause := tryTimeout, retryPause
	tryTimeout, retryPause = 300*time.Millisecond, 20*time.Millisecond
	t.Cleanup(func() { tryTimeout, retryPause = old, oldPause })
}

// ids records the request ids a fake schedd saw.
type ids struct {
	mu  sync.Mutex
	all []string
}

func (r *ids) add(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, id)
	return len(r.all)
}

func (r *ids) same(t *testing.T, want int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.all) != want {
		t.Fatalf("schedd saw %d tries, want %d: %q", len(r.all), want, r.all)
	}
	for _, id := range r.all {
		if id == "" || id != r.all[0] {
			t.Fatalf("tries carried request ids %q, want one id on every try", r.all)
		}
	}
}

func jobJSON(w http.ResponseWriter, state api.JobState) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(api.Job{ID: 7, State: state})
}

// TestUnknownOutcomeRetriedWithSameID: a leader that lost office while
// committing answers 504 with OutcomeUnknown; the client sends the same
// request id again (schedd applies it once) and reports the answer, where
// it used to treat it as not-leader and re-send a new, failing request.
func TestUnknownOutcomeRetriedWithSameID(t *testing.T) {
	fast(t)
	var seen ids
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.add(r.Header.Get(api.RequestHeader)) == 1 {
			w.Header().Set(api.OutcomeHeader, api.OutcomeUnknown)
			w.WriteHeader(http.StatusGatewayTimeout)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "outcome unknown: leadership lost while committing log"})
			return
		}
		jobJSON(w, api.JobHeld)
	}))
	defer srv.Close()
	c, err := NewWith(srv.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var told []string
	c.OnRetry(func(m string) { told = append(told, m) })
	j, err := c.Hold(context.Background(), 7)
	if err != nil || j.State != api.JobHeld {
		t.Fatalf("hold: %v %v, want the job HELD", j.State, err)
	}
	seen.same(t, 2)
	if len(told) != 1 || !strings.Contains(told[0], "same request id") {
		t.Fatalf("told %q, want one line saying it sends the same request id again", told)
	}
}

// TestCutAfterSendRetried (issue 12 item 8): with one address, a
// connection cut after the request was sent is retried with the same
// request id, and the submit succeeds, where it used to fail at once
// with "cannot reach schedd" though the job was stored.
func TestCutAfterSendRetried(t *testing.T) {
	fast(t)
	var seen ids
	var body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req api.SubmitRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		body.Store(req.RequestID)
		if seen.add(r.Header.Get(api.RequestHeader)) == 1 {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close() // the request arrived; the answer is lost
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(api.SubmitResponse{JobID: 42, Partition: "default"})
	}))
	defer srv.Close()
	c, _ := NewWith(srv.URL, Options{})
	var told []string
	c.OnRetry(func(m string) { told = append(told, m) })
	res, err := c.Submit(context.Background(), api.SubmitRequest{})
	if err != nil || res.JobID != 42 {
		t.Fatalf("submit: %+v %v, want job 42", res, err)
	}
	seen.same(t, 2)
	if body.Load() != seen.all[0] {
		t.Fatalf("body request id %q, header %q: want the same", body.Load(), seen.all[0])
	}
	if len(told) != 1 || !strings.Contains(told[0], "lost after the request was sent") {
		t.Fatalf("told %q, want a line saying the connection was lost after sending", told)
	}
}

// TestUnknownOutcomeSaidSo: when no retry settles a write, the error is
// ErrUnknownOutcome and says so; it never advises a plain retry.
func TestUnknownOutcomeSaidSo(t *testing.T) {
	fast(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	}))
	defer srv.Close()
	c, _ := NewWith(srv.URL, Options{})
	c.SetTimeout(time.Second)
	_, err := c.Kill(context.Background(), 7)
	if !errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("kill: %v, want ErrUnknownOutcome", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "outcome unknown") || strings.HasSuffix(msg, "retry") {
		t.Fatalf("message %q", msg)
	}
	// A read that never gets an answer is not "unknown": it is unreachable.
	if _, err := c.Jobs(context.Background(), 0, 0); errors.Is(err, ErrUnknownOutcome) || !errors.Is(err, ErrUnreachable) {
		t.Fatalf("jobs: %v, want ErrUnreachable", err)
	}
}

// TestFrozenPeerSkipped (issue 21 item 2): a peer that accepts the
// connection and never answers (SIGSTOPped, half-open) costs one try's
// deadline, then the next address answers; alone, it costs the overall
// limit and a clear error, never a hang.
func TestFrozenPeerSkipped(t *testing.T) {
	fast(t)
	frozen := make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-frozen
	}))
	defer func() { close(frozen); stuck.Close() }()
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { jobJSON(w, api.JobPending) }))
	defer good.Close()

	c, _ := NewWith(stuck.URL+","+good.URL, Options{})
	start := time.Now()
	if _, _, err := c.Job(context.Background(), 7, 0, 0); err != nil {
		t.Fatalf("job through a frozen peer and a live one: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}

	alone, _ := NewWith(stuck.URL, Options{})
	alone.SetTimeout(time.Second)
	done := make(chan error, 1)
	go func() { _, err := alone.Hold(context.Background(), 7); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnknownOutcome) {
			t.Fatalf("hold at a frozen peer: %v, want ErrUnknownOutcome (the request was sent)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("hold at a frozen peer still hangs after 10s (limit 1s)")
	}
}

// TestBlockingQueryOutlivesTryDeadline: a blocking query's wait extends
// the try's deadline, so long polls (bsub --wait, nodelets) still work.
func TestBlockingQueryOutlivesTryDeadline(t *testing.T) {
	fast(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Second) // more than tryTimeout, less than the wait
		jobJSON(w, api.JobPending)
	}))
	defer srv.Close()
	c, _ := NewWith(srv.URL, Options{})
	if _, _, err := c.Job(context.Background(), 7, 5, 3*time.Second); err != nil {
		t.Fatalf("blocking query: %v", err)
	}
}

// TestRedirectTargetNamed (issue 21 item 5): when the leader a follower
// redirects to cannot be reached, the error names that leader, not only
// the configured address; the next call goes to the leader it followed.
func TestRedirectTargetNamed(t *testing.T) {
	fast(t)
	dead := "http://" + freeport.Addr(t)
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, dead+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer follower.Close()
	c, _ := NewWith(follower.URL, Options{})
	_, err := c.Nodes(context.Background())
	if err == nil || !strings.Contains(err.Error(), dead) {
		t.Fatalf("error %v, want it to name the leader %s", err, dead)
	}

	var followerHits atomic.Int32
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { jobJSON(w, api.JobHeld) }))
	defer leader.Close()
	f2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		followerHits.Add(1)
		http.Redirect(w, r, leader.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer f2.Close()
	c2, _ := NewWith(f2.URL, Options{})
	for range 3 {
		if _, err := c2.Hold(context.Background(), 7); err != nil {
			t.Fatal(err)
		}
	}
	if n := followerHits.Load(); n != 1 {
		t.Fatalf("the follower got %d requests, want 1 (then the client goes to the leader)", n)
	}
}

// TestTokenNeverInClearText (issue 12 item 7): host:port means TLS; an
// explicit http:// to another host gets no token (the call is refused
// before anything is sent), while loopback and https get it.
func TestTokenNeverInClearText(t *testing.T) {
	fast(t)
	var got atomic.Value
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		jobJSON(w, api.JobPending)
	}))
	defer tlsSrv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	hostPort := strings.TrimPrefix(tlsSrv.URL, "https://")
	c, err := NewWith(hostPort, Options{CA: ca, Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Job(context.Background(), 7, 0, 0); err != nil {
		t.Fatalf("host:port against a TLS schedd: %v (host:port must mean https)", err)
	}
	if got.Load() != "Bearer s3cret" {
		t.Fatalf("token over https: %q", got.Load())
	}
	if len(c.Plain()) != 0 {
		t.Fatalf("Plain() = %q for a TLS address", c.Plain())
	}

	// 192.0.2.1 (TEST-NET-1) is not this host: nothing may be sent.
	plain, _ := NewWith("http://192.0.2.1:7946", Options{Token: "s3cret"})
	if len(plain.Plain()) != 1 {
		t.Fatalf("Plain() = %q, want the http:// address (for the CLIs' warning)", plain.Plain())
	}
	start := time.Now()
	_, err = plain.Submit(context.Background(), api.SubmitRequest{})
	if !errors.Is(err, ErrPlainToken) || !strings.Contains(err.Error(), "https://") {
		t.Fatalf("submit over plain http to another host: %v, want ErrPlainToken naming https://", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("refusal took %v: it must not be retried", d)
	}

	// Loopback over plain http is this machine: the token goes.
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		jobJSON(w, api.JobPending)
	}))
	defer local.Close()
	lc, _ := NewWith(local.URL, Options{Token: "s3cret"})
	if _, _, err := lc.Job(context.Background(), 7, 0, 0); err != nil || got.Load() != "Bearer s3cret" {
		t.Fatalf("loopback http: %v, token %q", err, got.Load())
	}
}

// TestNotAppliedRetriedElsewhere: a 503 (not applied: no leader) is
// retried on the next address within the limit.
func TestNotAppliedRetriedElsewhere(t *testing.T) {
	fast(t)
	var seen ids
	noLeader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.Header.Get(api.RequestHeader))
		w.Header().Set(api.OutcomeHeader, api.OutcomeNotApplied)
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(api.Error{Error: "not the raft leader"})
	}))
	defer noLeader.Close()
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.Header.Get(api.RequestHeader))
		jobJSON(w, api.JobCancelled)
	}))
	defer leader.Close()
	c, _ := NewWith(noLeader.URL+","+leader.URL, Options{})
	if j, err := c.Kill(context.Background(), 7); err != nil || j.State != api.JobCancelled {
		t.Fatalf("kill: %v %v", j.State, err)
	}
	seen.same(t, 2)
}

// TestSlowBodyNotCutOff: a peer that answers in time but sends a large
// body slowly (20,000 jobs on a busy machine) is read to the end; the
// per-try deadline covers the headers, not the whole body.
func TestSlowBodyNotCutOff(t *testing.T) {
	fast(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"jobs":[`))
		w.(http.Flusher).Flush()
		for i := range 10 {
			time.Sleep(100 * time.Millisecond) // 1 s in all: past the 300 ms try
			sep := ","
			if i == 0 {
				sep = ""
			}
			_, _ = w.Write([]byte(sep + `{"id":` + string(rune('1'+i%9)) + `}`))
			w.(http.Flusher).Flush()
		}
		_, _ = w.Write([]byte(`],"index":1}`))
	}))
	defer srv.Close()
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Jobs(context.Background(), 0, 0)
	if err != nil || len(l.Jobs) != 10 {
		t.Fatalf("slow list: %d jobs, %v; want all 10", len(l.Jobs), err)
	}
}

// TestNotSchedd: a web server at the address gets "not a troupe schedd
// at ADDR", not its HTML page as the error message, and is not retried.
func TestNotSchedd(t *testing.T) {
	fast(t)
	for _, code := range []int{http.StatusOK, http.StatusNotFound} {
		var tries atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tries.Add(1)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(code)
			_, _ = w.Write([]byte("<!DOCTYPE html>\n<html><body><h1>Welcome to nginx!</h1></body></html>\n"))
		}))
		c, err := NewWith(srv.URL, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = c.Job(context.Background(), 7, 0, 0)
		srv.Close()
		if !errors.Is(err, ErrNotSchedd) || !strings.Contains(err.Error(), "not a troupe schedd at "+srv.URL) || strings.Contains(err.Error(), "<") {
			t.Errorf("HTTP %d with a web page: error %v, want ErrNotSchedd naming %s and no HTML", code, err, srv.URL)
		}
		if n := tries.Load(); n != 1 {
			t.Errorf("HTTP %d with a web page: %d tries, want 1", code, n)
		}
	}
}

// TestWithTokenSharesConnections: a client made by WithToken sends its
// own token while the first keeps sending its own, and both go over one
// connection pool: two calls in turn, one from each, use one connection.
func TestWithTokenSharesConnections(t *testing.T) {
	var (
		mu    sync.Mutex
		seen  []string
		conns atomic.Int32
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	base, err := NewWith(srv.URL, Options{Token: "base-token", IdleConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	node := base.WithToken("node-token")
	ctx := context.Background()
	for _, c := range []*Client{base, node, base, node} {
		if _, err := c.Heartbeat(ctx, "n1", api.NodeHeartbeat{}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"Bearer base-token", "Bearer node-token", "Bearer base-token", "Bearer node-token"}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Errorf("tokens sent %q, want %q", seen, want)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for four calls in turn, want one shared", n)
	}
}

// TestTokenIsCredentialEnv: the variable the client takes its token from
// is one jobspec keeps out of every job's env.
func TestTokenIsCredentialEnv(t *testing.T) {
	if !jobspec.CredentialEnv(EnvToken) {
		t.Fatalf("$%s is not among jobspec's credential variables: a job could carry the token", EnvToken)
	}
}

// TestEachJobStreams: EachJob hands over each job as it comes off the
// answer: the server holds the rest of its list back until the first job
// was handed over. Members it does not know are skipped, and an error
// of the caller's stops the read and comes back as it is.
func TestEachJobStreams(t *testing.T) {
	got := make(chan uint64, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"note":{"a":[1]},"jobs":[{"id":1,"name":"one"}`))
		w.(http.Flusher).Flush()
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			return // the answer ends short: the client fails
		}
		_, _ = w.Write([]byte(`,{"id":2}],"index":9}`))
	}))
	defer srv.Close()
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	idx, err := c.EachJob(context.Background(), nil, 0, 0, func(j api.Job) error {
		if len(ids) == 0 {
			got <- j.ID
		}
		ids = append(ids, j.ID)
		return nil
	})
	if err != nil || idx != 9 || len(ids) != 2 || ids[0] != 1 || ids[1] != 2 {
		t.Fatalf("EachJob: ids %v index %d, %v; want [1 2] and 9", ids, idx, err)
	}
	enough := errors.New("enough")
	_, err = c.EachJob(context.Background(), nil, 0, 0, func(j api.Job) error {
		got <- j.ID
		return enough
	})
	if err != enough {
		t.Fatalf("a stop from the caller came back as %v", err)
	}
}

// TestReadYourWritesGivesUpBehind: a peer that never catches up with the
// client's last write (index 10) is not believed, its 404 neither: the
// read ends in ErrBehind (within ErrTimeout), not a stale answer. Reads
// carry the write's index as a blocking query; a client that wrote
// nothing sends none.
func TestReadYourWritesGivesUpBehind(t *testing.T) {
	fast(t)
	old := catchUpWait
	catchUpWait = 50 * time.Millisecond
	t.Cleanup(func() { catchUpWait = old })
	var indexes []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.Header().Set(api.IndexHeader, "10")
			jobJSON(w, api.JobCancelled)
			return
		}
		mu.Lock()
		indexes = append(indexes, r.URL.Query().Get("index"))
		mu.Unlock()
		w.Header().Set(api.IndexHeader, "5")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(api.Error{Error: "job 7: not found"})
	}))
	defer srv.Close()
	c, _ := NewWith(srv.URL, Options{})
	ctx := context.Background()
	if _, _, err := c.Job(ctx, 7, 0, 0); !IsNotFound(err) {
		t.Fatalf("before any write: %v, want the 404 as it is", err)
	}
	if _, err := c.Kill(ctx, 7); err != nil || c.Written() != 10 {
		t.Fatalf("kill: %v, index kept %d, want 10", err, c.Written())
	}
	c.SetTimeout(300 * time.Millisecond)
	_, _, err := c.Job(ctx, 7, 0, 0)
	if !errors.Is(err, ErrBehind) || !errors.Is(err, ErrTimeout) || IsNotFound(err) {
		t.Fatalf("read after the write from a peer behind it: %v, want ErrBehind", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(indexes) < 3 || indexes[0] != "" || indexes[1] != "9" {
		t.Fatalf("the reads carried index %q, want none before the write and 9 after it, retried", indexes)
	}
}
