package nodelet

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
	"github.com/troupe-hpc/troupe/sched"
)

// testSchedd is the real controller (raft on disk, scheduler loop)
// behind a real HTTP server. A thin wrapper in front of its handler
// records the container reports nodelets send and, on demand, answers
// 500 to them, as a schedd losing leadership would.
type testSchedd struct {
	srv *sched.Server
	hs  *httptest.Server
	cli *client.Client

	failStatus atomic.Int32 // answer 500 to this many status posts first
	dropStatus atomic.Bool  // answer 500 to every status post while set

	reportLog // the updates schedd accepted
}

func newTestSchedd(t *testing.T) *testSchedd {
	t.Helper()
	return newTestScheddWith(t, sched.Config{})
}

// newTestScheddWith is newTestSchedd with cfg (its data dir and logger
// filled in).
func newTestScheddWith(t *testing.T, cfg sched.Config) *testSchedd {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg.DataDir, cfg.Logger = t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := sched.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	s := &testSchedd{srv: srv}
	s.hs = httptest.NewServer(s.wrap(srv.Handler()))
	// Registered first, so run last: after the agents' own cleanups
	// have stopped them.
	t.Cleanup(func() { s.hs.Close(); cancel(); <-done; srv.Close() })
	if s.cli, err = client.New(s.hs.URL); err != nil {
		t.Fatal(err)
	}
	return s
}

// wrap records status posts and fails them when asked to.
func (s *testSchedd) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/status") {
			h.ServeHTTP(w, r)
			return
		}
		if s.dropStatus.Load() || s.failStatus.Add(-1) >= 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "raft: not leader"})
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		var rep api.ContainerReport
		if rec.code/100 == 2 && json.Unmarshal(body, &rep) == nil {
			s.add(rep.Updates)
		}
	})
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) { r.code = code; r.ResponseWriter.WriteHeader(code) }

// submit submits a session of len(cmds) containers of the current user:
// main1 runs cmds[0]; the subs wait (their role has no command).
func (s *testSchedd) submit(t *testing.T, cwd string, edit func(*jobspec.Job), cmds ...[]string) uint64 {
	t.Helper()
	spec := jobspec.Job{
		Name: "t", Image: "host", Command: cmds[0],
		Cluster:   jobspec.Cluster{Size: len(cmds), Mode: jobspec.ModeSingleNode},
		Resources: jobspec.Resources{CPU: 0.5, Memory: 64 << 20},
		Env:       map[string]string{"EPOCHS": "10"},
	}
	if edit != nil {
		edit(&spec)
	}
	res, err := s.cli.Submit(context.Background(), api.SubmitRequest{
		Spec: wire.ToAPI(spec), Cwd: cwd, User: "alice", UID: uid(), GID: gid()})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return res.JobID
}

// waitJob blocks on the job until cond holds.
func (s *testSchedd) waitJob(t *testing.T, id uint64, cond func(api.Job) bool) api.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var idx uint64
	for {
		j, i, err := s.cli.Job(ctx, id, idx, 5*time.Second)
		if err != nil {
			t.Fatalf("waiting for job %d: %v", id, err)
		}
		if cond(j) {
			return j
		}
		idx = i
	}
}

// registered reports whether schedd knows node.
func (s *testSchedd) registered(node string) bool {
	return s.srv.Store().Snapshot().Node(node) != nil
}

func buildSSH(t *testing.T) string   { return runtimetest.BuildCmd(t, SSHName) }
func buildFence(t *testing.T) string { return runtimetest.BuildCmd(t, FenceName) }

// containerIDs are the runtime IDs of job id's containers.
func (s *testSchedd) containerIDs(t *testing.T, id uint64) []string {
	t.Helper()
	j := s.waitJob(t, id, func(api.Job) bool { return true })
	var ids []string
	for _, c := range j.Containers {
		ids = append(ids, ContainerID(assigned(t, j), c.Host))
	}
	return ids
}

// assigned is view j as an assignment carries it (the same JSON names).
func assigned(t *testing.T, j api.Job) *api.AssignedJob {
	t.Helper()
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	var a api.AssignedJob
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	return &a
}
