package sched

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/auth"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

func TestHistory(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ended := func(id uint64, user string, state api.JobState, submit, start, end int) api.Job {
		j := api.Job{ID: id, Name: "j", User: user, Partition: "default", State: state,
			Submitted: t0.Add(time.Duration(submit) * time.Minute), Ended: t0.Add(time.Duration(end) * time.Minute)}
		if start >= 0 {
			j.Started = t0.Add(time.Duration(start) * time.Minute)
		}
		return j
	}
	a := ended(1, "alice", api.JobCompleted, 0, 1, 10)
	a.CPUTime, a.MemPeak = 90*time.Second, 300<<20
	a.Containers = []api.Container{
		{ContainerSpec: wire.ContainerToAPI(jobspec.Container{Host: "main1"}), Node: "n2"},
		{ContainerSpec: wire.ContainerToAPI(jobspec.Container{Host: "sub1"}), Node: "n1"},
		{ContainerSpec: wire.ContainerToAPI(jobspec.Container{Host: "sub2"}), Node: "n2"},
	}
	a.Signals = []api.SignalRequest{{Seq: 1, Signal: 10, Time: t0.Add(5 * time.Minute)}, {Seq: 2, Signal: 1, Host: "main1", Time: t0.Add(6 * time.Minute)}}
	b := ended(2, "bob", api.JobCancelled, 2, -1, 3)
	c := ended(3, "alice", api.JobFailed, 4, 5, 8)
	c.ExitCode, c.Reason = 2, "main1: oops"
	jobs := []api.HistoryJob{HistoryRecord(a), HistoryRecord(b), HistoryRecord(c)}

	ids := func(hs []api.HistoryJob) []uint64 {
		var out []uint64
		for _, h := range hs {
			out = append(out, h.ID)
		}
		return out
	}
	for _, tt := range []struct {
		q    api.HistoryFilter
		want []uint64
	}{
		{api.HistoryFilter{}, []uint64{2, 3, 1}}, // by end time
		{api.HistoryFilter{Users: []string{"alice"}}, []uint64{3, 1}},
		{api.HistoryFilter{Limit: 2}, []uint64{3, 1}},
		{api.HistoryFilter{SubmittedFrom: t0.Add(time.Minute)}, []uint64{2, 3}},
		{api.HistoryFilter{EndedTo: t0.Add(8 * time.Minute)}, []uint64{2, 3}},
		{api.HistoryFilter{EndedFrom: t0.Add(4 * time.Minute), SubmittedTo: t0.Add(time.Minute)}, []uint64{1}},
	} {
		if got := ids(History(jobs, tt.q)); !slices.Equal(got, tt.want) {
			t.Errorf("%+v: %v, want %v", tt.q, got, tt.want)
		}
	}

	h := HistoryRecord(a)
	if h.Wait != time.Minute || h.Run != 9*time.Minute || h.CPUTime != 90*time.Second || h.MemPeak != 300<<20 || !slices.Equal(h.Nodes, []string{"n2", "n1"}) {
		t.Errorf("record %+v", h)
	}
	var ev []string
	for _, e := range h.Events {
		ev = append(ev, e.Time.Format("15:04")+" "+e.Event+" "+e.Detail)
	}
	want := "10:00 submitted to partition default, 3 containers|10:01 started on n2, n1|10:05 signalled SIGUSR1 to all containers|" +
		"10:06 signalled SIGHUP to main1|10:10 ended COMPLETED, exit code 0"
	if got := strings.Join(ev, "|"); got != want {
		t.Errorf("events\n%s\nwant\n%s", got, want)
	}
	hb := HistoryRecord(b)
	if hb.Wait != time.Minute || hb.Run != 0 || len(hb.Events) != 2 {
		t.Errorf("never started: %+v", hb)
	}
	if hc := HistoryRecord(c); hc.Events[len(hc.Events)-1].Detail != "FAILED, exit code 2: main1: oops" {
		t.Errorf("failed: %+v", hc.Events)
	}

	// The end its node measured may come a hair before the commit of
	// the signal that ended it: the signal is still the last run's.
	c.Signals = []api.SignalRequest{{Seq: 1, Signal: 15, Host: "main1", Time: c.Ended.Add(3 * time.Millisecond)}}
	if hc := HistoryRecord(c); len(hc.Events) != 4 || hc.Events[2].Event != api.EventSignalled {
		t.Errorf("a signal committed just after the node-measured end: timeline %+v, want it signalled", hc.Events)
	}
}

// TestSignalAndHistoryHTTP: bob may not signal alice's job; a bad signal
// name is a 400 with one line; alice's cancel-by-INT works; bob's
// history shows alice's job redacted.
func TestSignalAndHistoryHTTP(t *testing.T) {
	srv, c := cluster(t)
	register(t, c, "n1", 4)
	alice := auth.Identity{UID: 1001, GID: 1001, User: "alice"}
	bob := auth.Identity{UID: 1002, GID: 1002, User: "bob"}
	code, body := as(srv, alice, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1)), Hold: true})
	var res api.SubmitResponse
	if code != http.StatusCreated || json.Unmarshal(body, &res) != nil {
		t.Fatalf("submit: %d %s", code, body)
	}
	path := "/v1/jobs/" + jsonNum(res.JobID) + "/signal"
	if code, body := as(srv, bob, "POST", path, api.SignalJob{Signal: "INT"}); code != http.StatusForbidden || !strings.Contains(string(body), "only your own jobs") {
		t.Errorf("bob signals alice's job: %d %s", code, body)
	}
	if code, body := as(srv, alice, "POST", path, api.SignalJob{Signal: "BOGUS"}); code != http.StatusBadRequest || !strings.Contains(string(body), `signal \"BOGUS\": unknown`) {
		t.Errorf("bogus signal: %d %s", code, body)
	}
	if code, body := as(srv, alice, "POST", path, api.SignalJob{Signal: "USR1"}); code != http.StatusConflict {
		t.Errorf("USR1 to a held job: %d %s", code, body)
	}
	if code, body := as(srv, alice, "POST", path, api.SignalJob{Signal: "INT"}); code != http.StatusOK {
		t.Errorf("INT to a held job: %d %s", code, body)
	}
	code, body = as(srv, bob, "GET", "/v1/history?user=alice", nil)
	var h api.History
	if code != http.StatusOK || json.Unmarshal(body, &h) != nil || len(h.Jobs) != 1 || h.Jobs[0].State != api.JobCancelled {
		t.Fatalf("history: %d %s", code, body)
	}
	if code, _ := as(srv, bob, "GET", "/v1/history?limit=x", nil); code != http.StatusBadRequest {
		t.Errorf("bad limit: %d", code)
	}
}
