package sched

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/httpapi"
)

// TestSubmitRequestIDIsTheUsers: bob sends a submit with the request id
// alice's submit used (a client's retry key): he gets a new job of his
// own, not alice's job id; alice's own retry still gets her first job.
func TestSubmitRequestIDIsTheUsers(t *testing.T) {
	srv, _ := cluster(t)
	alice := auth.Identity{UID: 1001, GID: 1001, User: "alice"}
	bob := auth.Identity{UID: 1002, GID: 1002, User: "bob"}
	submit := func(id auth.Identity) uint64 {
		t.Helper()
		code, body := as(srv, id, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1)), RequestID: "alices-retry-key", Hold: true})
		var res api.SubmitResponse
		if err := json.Unmarshal(body, &res); err != nil || code != http.StatusCreated {
			t.Fatalf("submit as %s: %d %s", id.User, code, body)
		}
		return res.JobID
	}
	first := submit(alice)
	theirs := submit(bob)
	if theirs == first {
		t.Fatalf("bob's submit with alice's request id answered alice's job %d", first)
	}
	if j := srv.Store().Snapshot().Job(theirs); j == nil || j.User != "bob" || j.UID != 1002 {
		t.Fatalf("bob's submit made %+v, want a job of bob's", j)
	}
	if again := submit(alice); again != first {
		t.Fatalf("alice's retry made job %d, want her first %d", again, first)
	}
	if again := submit(bob); again != theirs {
		t.Fatalf("bob's retry made job %d, want his first %d", again, theirs)
	}
}

// TestQueuedInputPerUserLimit: one user's waiting jobs hold at most
// MaxQueuedInputPerUser bytes of text together; the submit past it is
// refused (429) with the limit's name, and another user is not affected.
func TestQueuedInputPerUserLimit(t *testing.T) {
	sp := spec(1, "single-node", 1)
	sp.Env = map[string]string{"DATA": strings.Repeat("d", 30<<10)}
	size, _ := sp.InputSize()
	srv, _ := clusterWith(t, Config{MaxQueuedInputPerUser: 3 * size})
	alice := auth.Identity{UID: 1001, GID: 1001, User: "alice"}
	bob := auth.Identity{UID: 1002, GID: 1002, User: "bob"}
	for i := range 3 {
		if code, body := as(srv, alice, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(sp), Hold: true}); code != http.StatusCreated {
			t.Fatalf("alice's job %d: %d %s", i+1, code, body)
		}
	}
	code, body := as(srv, alice, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(sp), Hold: true})
	if code != http.StatusTooManyRequests || !strings.Contains(string(body), "max_queued_input_per_user") {
		t.Fatalf("alice's 4th job past her bytes: %d %s", code, body)
	}
	if code, body := as(srv, bob, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(sp), Hold: true}); code != http.StatusCreated {
		t.Fatalf("bob's job: %d %s", code, body)
	}
	if got := srv.Store().Snapshot().QueuedInputOf(1001); got != 3*size {
		t.Fatalf("alice's queued text %d bytes, want %d", got, 3*size)
	}
}

// TestQueuedInputPerUserDefault: without a setting one user's waiting
// jobs hold at most DefaultMaxQueuedInputPerUser bytes of text, far less
// than DefaultMaxQueuedPerUser jobs at the largest max_job_input.
func TestQueuedInputPerUserDefault(t *testing.T) {
	srv, _ := cluster(t)
	if got := srv.admission().MaxQueuedInputPerUser; got != DefaultMaxQueuedInputPerUser {
		t.Fatalf("max_queued_input_per_user %d by default, want %d", got, DefaultMaxQueuedInputPerUser)
	}
	if DefaultMaxQueuedInputPerUser*8 > DefaultMaxQueuedPerUser*srv.cfg.MaxJobInput {
		t.Fatalf("the default bound %d is not well below %d jobs of %d bytes", DefaultMaxQueuedInputPerUser, DefaultMaxQueuedPerUser, srv.cfg.MaxJobInput)
	}
	srv, _ = clusterWith(t, Config{MaxQueuedInputPerUser: -1})
	if got := srv.admission().MaxQueuedInputPerUser; got != 0 {
		t.Fatalf("a negative setting gave the limit %d, want 0 (unlimited)", got)
	}
}

// TestSubmitRefusesCredentialEnv: a submit that carries a troupe token in
// its env, straight through the API as any client may send it, is
// refused, and the token is nowhere in the state.
func TestSubmitRefusesCredentialEnv(t *testing.T) {
	srv, _ := cluster(t)
	nobody := auth.Identity{UID: 65534, GID: 65534, User: "nobody"}
	sp := spec(1, "single-node", 1)
	sp.Env = map[string]string{"TROUPE_TOKEN": "tk-leaked-secret"}
	code, body := as(srv, nobody, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(sp)})
	if code != http.StatusBadRequest || !strings.Contains(string(body), "TROUPE_TOKEN") {
		t.Fatalf("submit with TROUPE_TOKEN in its env: %d %s", code, body)
	}
	code, body = as(srv, nobody, "POST", "/v1/jobs/batch", api.SubmitBatch{Jobs: []api.SubmitRequest{{Spec: wire.ToAPI(sp)}}})
	if code != http.StatusBadRequest {
		t.Fatalf("batch submit with TROUPE_TOKEN in its env: %d %s", code, body)
	}
	dump, err := json.Marshal(srv.Store().Snapshot().Dump())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(dump), "tk-leaked-secret") {
		t.Fatal("the token is in the replicated state")
	}
}

// countingJobs is the controller with its job listings counted as they
// are read off the state.
type countingJobs struct {
	*Server
	read atomic.Int64
}

func (c *countingJobs) ListJobs(ctx context.Context, w httpapi.Wait, q httpapi.JobsQuery) (uint64, iter.Seq[api.Job]) {
	idx, jobs := c.Server.ListJobs(ctx, w, q)
	return idx, func(yield func(api.Job) bool) {
		for j := range jobs {
			c.read.Add(1)
			if !yield(j) {
				return
			}
		}
	}
}

// firstWrite is a response that notes how many jobs had been read when
// its first bytes were written.
type firstWrite struct {
	*httptest.ResponseRecorder
	read  *atomic.Int64
	atOne int64
}

func (w *firstWrite) Write(p []byte) (int, error) {
	if w.atOne == 0 {
		w.atOne = w.read.Load()
	}
	return w.ResponseRecorder.Write(p)
}

// TestJobListStreams: GET /v1/jobs of an admin (bqueue -u all) writes
// its answer while it reads the jobs off the state: the first bytes go
// out long before the last job is read, so that the answer is never held
// whole, however many jobs the state keeps.
func TestJobListStreams(t *testing.T) {
	srv, _ := cluster(t)
	alice := auth.Identity{UID: 1001, GID: 1001, User: "alice"}
	const n = 1000
	reqs := make([]api.SubmitRequest, n)
	for i := range reqs {
		reqs[i] = api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1)), Hold: true}
	}
	if code, body := as(srv, alice, "POST", "/v1/jobs/batch", api.SubmitBatch{Jobs: reqs}); code != http.StatusCreated {
		t.Fatalf("batch: %d %.300s", code, body)
	}
	ctl := &countingJobs{Server: srv}
	root := auth.Identity{UID: 0, GID: 0, User: "root", Admin: true}
	r := httptest.NewRequest("GET", "/v1/jobs", nil).WithContext(auth.WithIdentity(context.Background(), root))
	w := &firstWrite{ResponseRecorder: httptest.NewRecorder(), read: &ctl.read}
	httpapi.New(ctl, nil).Handler().ServeHTTP(w, r)
	var list api.JobList
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil || len(list.Jobs) != n {
		t.Fatalf("answer: %d jobs, %v", len(list.Jobs), err)
	}
	t.Logf("first bytes after %d of %d jobs, %d bytes in all", w.atOne, n, w.Body.Len())
	if w.atOne == 0 || w.atOne >= n/2 {
		t.Fatalf("the answer's first bytes went out after %d of %d jobs were read: it was held, not streamed", w.atOne, n)
	}
}
