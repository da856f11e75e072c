package sched

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// TestJobsQuery: GET /v1/jobs answers only the jobs its filters pick
// (user, partition, state, ended=false, after, limit); without them,
// every job as before; a bad filter is a 400 naming it.
func TestJobsQuery(t *testing.T) {
	srv, _ := cluster(t)
	alice := auth.Identity{UID: 1001, GID: 1001, User: "alice"}
	bob := auth.Identity{UID: 1002, GID: 1002, User: "bob"}
	submit := func(who auth.Identity) uint64 {
		code, body := as(srv, who, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1)), Hold: true})
		var res api.SubmitResponse
		if code != http.StatusCreated || json.Unmarshal(body, &res) != nil {
			t.Fatalf("submit: %d %s", code, body)
		}
		return res.JobID
	}
	a1, a2, b1 := submit(alice), submit(alice), submit(bob)
	if code, body := as(srv, alice, "POST", "/v1/jobs/"+jsonNum(a1)+"/kill", nil); code != http.StatusOK {
		t.Fatalf("kill: %d %s", code, body)
	}
	ids := func(q string) string {
		t.Helper()
		code, body := as(srv, bob, "GET", "/v1/jobs"+q, nil)
		var l api.JobList
		if code != http.StatusOK || json.Unmarshal(body, &l) != nil {
			t.Fatalf("%s: %d %s", q, code, body)
		}
		var out []uint64
		for _, j := range l.Jobs {
			out = append(out, j.ID)
		}
		return fmt.Sprint(out)
	}
	for q, want := range map[string][]uint64{
		"":                             {a1, a2, b1},
		"?user=alice":                  {a1, a2},
		"?ended=false":                 {a2, b1},
		"?user=alice&ended=false":      {a2},
		"?state=cancelled":             {a1},
		"?state=HELD&user=bob":         {b1},
		"?ended=false&state=CANCELLED": {a1},
		"?partition=default&limit=2":   {a1, a2},
		"?after=" + jsonNum(a1):        {a2, b1},
		"?partition=gpu":               nil,
		// Read through the state and user indexes: several values
		// merge in id order, a repeated one counts once.
		"?user=bob&user=alice&user=bob":                  {a1, a2, b1},
		"?state=HELD&state=CANCELLED&state=HELD":         {a1, a2, b1},
		"?state=held&state=held&limit=1":                 {a2},
		"?state=cancelled&state=held&user=alice&limit=1": {a1},
		"?state=RUNNING":                                 nil,
		"?user=carol":                                    nil,
	} {
		if got := ids(q); got != fmt.Sprint(want) {
			t.Errorf("GET /v1/jobs%s: %s, want %v", q, got, want)
		}
	}
	for _, bad := range []string{"?state=LOST", "?ended=maybe", "?limit=-1", "?after=x"} {
		if code, _ := as(srv, bob, "GET", "/v1/jobs"+bad, nil); code != http.StatusBadRequest {
			t.Errorf("GET /v1/jobs%s: %d, want 400", bad, code)
		}
	}
}

// TestJobsListStreamed: GET /v1/jobs, written a job at a time, answers
// byte for byte what encoding the whole api.JobList at once did, for no
// job, one, and several.
func TestJobsListStreamed(t *testing.T) {
	srv, _ := cluster(t)
	alice := auth.Identity{UID: 1001, GID: 1001, User: "alice"}
	for _, q := range []string{"?user=alice", "?user=alice&limit=1", "?user=alice&limit=3"} {
		code, body := as(srv, alice, "GET", "/v1/jobs"+q, nil)
		var l api.JobList
		if code != http.StatusOK || json.Unmarshal(body, &l) != nil {
			t.Fatalf("GET /v1/jobs%s: %d %s", q, code, body)
		}
		if l.Jobs == nil {
			l.Jobs = []api.Job{}
		}
		want, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		if string(body) != string(want)+"\n" {
			t.Errorf("GET /v1/jobs%s answered\n%s\nwant\n%s", q, body, want)
		}
		if len(l.Jobs) == 0 {
			code, body := as(srv, alice, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1)), Hold: true})
			if code != http.StatusCreated {
				t.Fatalf("submit: %d %s", code, body)
			}
			code, body = as(srv, alice, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1)), Hold: true})
			if code != http.StatusCreated {
				t.Fatalf("submit: %d %s", code, body)
			}
		}
	}
}
