package sched

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// TestSubmitBatch: POST /v1/jobs/batch stores its jobs with consecutive
// ids as the caller's, counts the jobs ahead in the batch against the
// queue limit, and stores none when it refuses one, naming it.
func TestSubmitBatch(t *testing.T) {
	srv, _ := clusterWith(t, Config{MaxQueuedPerUser: 3})
	alice := auth.Identity{UID: 1001, GID: 1001, User: "alice"}
	batch := func(n int, edit func(i int, r *api.SubmitRequest)) api.SubmitBatch {
		var b api.SubmitBatch
		for i := range n {
			r := api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), UID: 0, GID: 0, User: "root", Source: fmt.Sprintf("j%d.hcl", i+1)}
			if edit != nil {
				edit(i, &r)
			}
			b.Jobs = append(b.Jobs, r)
		}
		return b
	}

	code, body := as(srv, alice, "POST", "/v1/jobs/batch", batch(2, nil))
	if code != http.StatusCreated {
		t.Fatalf("batch of 2: %d %s", code, body)
	}
	var res api.SubmitBatchResponse
	if err := json.Unmarshal(body, &res); err != nil || len(res.Jobs) != 2 || res.Jobs[1].JobID != res.Jobs[0].JobID+1 || res.Jobs[0].Partition == "" {
		t.Fatalf("answer %s (%v)", body, err)
	}
	for _, r := range res.Jobs {
		j := srv.Store().Snapshot().Job(r.JobID)
		if j == nil || j.UID != alice.UID || j.User != "alice" {
			t.Fatalf("job %d: %+v, want alice's", r.JobID, j)
		}
	}

	// Two more make four, over the limit of 3: refused whole, the second
	// named (the first alone would fit), with 429 as a single submit gets.
	stored := len(srv.Store().Snapshot().Jobs())
	code, body = as(srv, alice, "POST", "/v1/jobs/batch", batch(2, nil))
	if code != http.StatusTooManyRequests || !strings.Contains(string(body), "job 2 of 2 (j2.hcl)") || !strings.Contains(string(body), "already has 3 jobs pending or held") {
		t.Fatalf("batch over the queue limit: %d %s", code, body)
	}
	code, body = as(srv, alice, "POST", "/v1/jobs/batch", batch(1, func(_ int, r *api.SubmitRequest) { r.Spec.Name = "bad name" }))
	if code != http.StatusBadRequest || !strings.Contains(string(body), "job 1 of 1 (j1.hcl)") || !strings.Contains(string(body), "Invalid job name") {
		t.Fatalf("batch with an invalid job: %d %s", code, body)
	}
	if n := len(srv.Store().Snapshot().Jobs()); n != stored {
		t.Fatalf("%d jobs stored after refusals, want %d", n, stored)
	}

	for _, b := range []api.SubmitBatch{{}, batch(api.MaxSubmitBatch+1, nil)} {
		code, body = as(srv, alice, "POST", "/v1/jobs/batch", b)
		if code != http.StatusBadRequest || !strings.Contains(string(body), "batch submit") {
			t.Fatalf("batch of %d: %d %s", len(b.Jobs), code, body)
		}
	}
}

// TestSubmitBatchIdempotent: a batch sent again with the same request id
// (a client's retry) answers the jobs the first made, whether the ids are
// the jobs' own or derived from the request's header.
func TestSubmitBatchIdempotent(t *testing.T) {
	srv, c := cluster(t)
	reqs := []api.SubmitRequest{{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), RequestID: "r-1"}, {Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), RequestID: "r-2"}}
	first, err := c.SubmitBatch(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.SubmitBatch(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	if first[0].JobID != again[0].JobID || first[1].JobID != again[1].JobID || first[0].JobID == first[1].JobID {
		t.Fatalf("first %+v, again %+v: want the same two jobs", first, again)
	}

	// The same body and X-Troupe-Request twice, no ids of the jobs' own.
	body, _ := json.Marshal(api.SubmitBatch{Jobs: []api.SubmitRequest{{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1))}, {Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1))}}})
	var ids [2][]uint64
	for i := range ids {
		r := httptest.NewRequest("POST", "/v1/jobs/batch", bytes.NewReader(body))
		r.Header.Set(api.RequestHeader, "retried-batch")
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, r)
		var res api.SubmitBatchResponse
		if err := json.Unmarshal(w.Body.Bytes(), &res); w.Code != http.StatusCreated || err != nil {
			t.Fatalf("try %d: %d %s", i+1, w.Code, w.Body)
		}
		for _, j := range res.Jobs {
			ids[i] = append(ids[i], j.JobID)
		}
	}
	if len(ids[0]) != 2 || fmt.Sprint(ids[0]) != fmt.Sprint(ids[1]) || ids[0][0] == ids[0][1] {
		t.Fatalf("ids %v then %v: want the same two jobs", ids[0], ids[1])
	}
	if j := srv.Store().Snapshot().Job(ids[0][1]); j == nil || j.RequestID != "retried-batch/2" {
		t.Fatalf("second job %+v: want request id retried-batch/2", j)
	}
}
