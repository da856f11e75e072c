package state

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestRequestAppliedOnce: a hold, release, kill or signal sent again with
// the request id of one already applied (the client re-sends after a
// leader lost office mid-commit, or after a cut connection) answers as
// the first did and changes nothing, where it used to fail on its own
// effect ("job 1 is already held", "already ended").
func TestRequestAppliedOnce(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})

	twice := func(c Command) (*Job, *Job) {
		t.Helper()
		first := h.apply(c).(*Job)
		before := h.job(first.ID).ModifyIndex
		again := h.apply(c).(*Job) // fails the test on an error
		if h.job(first.ID).ModifyIndex != before {
			t.Fatalf("repeated %s changed job %d", c.Kind(), first.ID)
		}
		return first, again
	}
	for _, c := range []Command{
		{Act: Hold{Job: JobRef{ID: 1}, Request: Request{ID: "r-hold"}}},
		{Act: Release{Job: JobRef{ID: 1}, Request: Request{ID: "r-release"}}},
		{Act: Kill{Job: JobRef{ID: 1}, Request: Request{ID: "r-kill"}}},
	} {
		first, again := twice(c)
		if again.State != first.State || again.ModifyIndex != first.ModifyIndex {
			t.Errorf("repeated %s answered %s@%d, want the first answer %s@%d", c.Kind(), again.State, again.ModifyIndex, first.State, first.ModifyIndex)
		}
	}
	if h.job(1).State != api.JobCancelled {
		t.Fatalf("job 1 is %s, want CANCELLED", h.job(1).State)
	}

	// A signal to a running job is recorded once.
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 2, Nodes: []string{"n1"}}}}}})
	h.report("n1", 2, "main1", api.ContainerRunning, 0)
	twice(Command{Act: SignalJob{Signal: &Signal{JobID: 2, Signal: int(syscall.SIGUSR1)}, Request: Request{ID: "r-sig"}}})
	if n := len(h.job(2).Signals); n != 1 {
		t.Fatalf("job 2 has %d signal requests, want 1", n)
	}

	// The same id for another command is refused, not answered.
	h.idx++
	if _, err := h.st.Apply(h.idx, Command{Time: t0.Add(time.Hour), Act: Kill{Job: JobRef{ID: 2}, Request: Request{ID: "r-hold"}}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("request id reused for another command: %v, want a conflict", err)
	}
	// Without an id nothing is remembered: the old refusal stands.
	h.idx++
	if _, err := h.st.Apply(h.idx, Command{Act: Kill{Job: JobRef{ID: 1}}}); !errors.Is(err, ErrEnded) {
		t.Fatalf("kill of an ended job without a request id: %v, want ErrEnded", err)
	}

	// The answers travel in snapshots, so a peer that installs one
	// answers repeats the same.
	st := New()
	if err := st.Restore(h.st.Snapshot().Dump()); err != nil {
		t.Fatal(err)
	}
	if n := st.Snapshot().Requests(); n != 4 {
		t.Fatalf("restored %d request answers, want 4", n)
	}
}

// TestRequestAnswersForgotten: answers are kept RequestTTL by the
// commands' own clock, so the table stays bounded and every replica
// forgets the same ones.
func TestRequestAnswersForgotten(t *testing.T) {
	h := newHarness(t)
	for range 3 {
		h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	}
	at := func(c Command, d time.Duration) {
		t.Helper()
		h.idx++
		c.Time = t0.Add(d)
		if _, err := h.st.Apply(h.idx, c); err != nil {
			t.Fatal(err)
		}
	}
	at(Command{Act: Hold{Job: JobRef{ID: 1}, Request: Request{ID: "a"}}}, 0)
	at(Command{Act: Hold{Job: JobRef{ID: 2}, Request: Request{ID: "b"}}}, time.Minute)
	at(Command{Act: Hold{Job: JobRef{ID: 3}, Request: Request{ID: "c"}}}, RequestTTL+30*time.Second)
	if n := h.st.Snapshot().Requests(); n != 2 {
		t.Fatalf("%d answers kept, want 2 (the first is past RequestTTL)", n)
	}
}

// TestSubmitRequestScopedToUser: a request id names a retry of its own
// user's submit only. Bob, who read alice's request id off a listing,
// sends it with a submit of his own: he gets a new job of his, not
// alice's id, in a single submit, a group of them and a batch alike;
// alice's retry still gets her first job.
func TestSubmitRequestScopedToUser(t *testing.T) {
	h := newHarness(t)
	as := func(user, req string) *Job {
		j := session(1)
		j.User, j.RequestID = user, req
		return j
	}
	alice := h.apply(Command{Act: Submit{Jobs: []*Job{as("alice", "r1")}}}).([]uint64)[0]

	bob := h.apply(Command{Act: Submit{Jobs: []*Job{as("bob", "r1")}}}).([]uint64)[0]
	if bob == alice {
		t.Fatalf("bob's submit with alice's request id answered alice's job %d", alice)
	}
	if j := h.job(bob); j == nil || j.User != "bob" {
		t.Fatalf("bob's submit made %+v, want a job of bob's", j)
	}
	out := h.apply(Command{Act: Submit{Jobs: []*Job{as("bob", "r1"), as("alice", "r1"), as("bob", "r2")}, Each: true}}).([]Submitted)
	if out[0].ID != bob || out[1].ID != alice {
		t.Errorf("retries in a group: bob %d alice %d, want their own first jobs %d and %d", out[0].ID, out[1].ID, bob, alice)
	}
	ids := h.apply(Command{Act: Submit{Jobs: []*Job{as("carol", "r1")}}}).([]uint64)
	if ids[0] == alice || ids[0] == bob || h.job(ids[0]).User != "carol" {
		t.Errorf("carol's batch with a used request id answered job %d", ids[0])
	}
}

// TestSubmitRequestLegacyReplay: entries written before schema 7 replay
// as they were first applied, by the request id alone, so that a log
// written by an older schedd gives its jobs the same ids again.
func TestSubmitRequestLegacyReplay(t *testing.T) {
	h := newHarness(t)
	as := func(user string) *Job {
		j := session(1)
		j.User, j.RequestID = user, "r1"
		return j
	}
	first := h.apply(Command{Version: 6, Act: Submit{Jobs: []*Job{as("alice")}}}).([]uint64)[0]
	if again := h.apply(Command{Version: 6, Act: Submit{Jobs: []*Job{as("bob")}}}).([]uint64)[0]; again != first {
		t.Fatalf("a schema 6 entry replayed as job %d, want %d as it was first applied", again, first)
	}
	if n := len(h.st.Snapshot().Jobs()); n != 1 {
		t.Fatalf("%d jobs after the replay, want 1", n)
	}
}

// TestRequestIsTheSenders: a hold's request id is its sender's own: bob
// sending alice's id with a command of his is applied as his own (not
// refused as a reuse, nor answered with alice's job), and alice's repeat
// still gets her first answer.
func TestRequestIsTheSenders(t *testing.T) {
	h := newHarness(t)
	a := h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}).([]uint64)[0]
	b := h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}).([]uint64)[0]
	first := h.apply(Command{Act: Hold{Job: JobRef{ID: a}, Request: Request{ID: "r", By: "alice"}}}).(*Job)
	theirs := h.apply(Command{Act: Hold{Job: JobRef{ID: b}, Request: Request{ID: "r", By: "bob"}}}).(*Job)
	if theirs.ID != b || h.job(b).State != api.JobHeld {
		t.Fatalf("bob's hold with alice's request id answered job %d, job %d is %s", theirs.ID, b, h.job(b).State)
	}
	if again := h.apply(Command{Act: Hold{Job: JobRef{ID: a}, Request: Request{ID: "r", By: "alice"}}}).(*Job); again.ID != first.ID || again.ModifyIndex != first.ModifyIndex {
		t.Fatalf("alice's repeat answered %+v, want her first answer", again)
	}
	if n := h.st.Snapshot().Requests(); n != 2 {
		t.Fatalf("%d answers kept, want 2", n)
	}
	d := New()
	if err := d.Restore(h.st.Snapshot().Dump()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Apply(h.idx+1, Command{Version: SchemaVersion, Time: t0.Add(time.Hour), Act: Hold{Job: JobRef{ID: a}, Request: Request{ID: "r", By: "bob"}}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("after a restore, bob's reuse of his own id for another job: %v, want a conflict", err)
	}
}
