package state

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// running submits a session of n containers with walltime w on n1 and
// reports every container running: job id, started at the last entry.
func (h *harness) running(n int, w time.Duration, warn *Warning) uint64 {
	h.t.Helper()
	j := session(n)
	j.Walltime, j.Spec.Signal = w, warn
	id := h.apply(Command{Act: Submit{Jobs: []*Job{j}}}).([]uint64)[0]
	nodes := make([]string, n)
	for i := range nodes {
		nodes[i] = "n1"
	}
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: id, Nodes: nodes}}}}})
	for _, c := range h.job(id).Containers {
		h.report("n1", id, c.Host, api.ContainerRunning, 0)
	}
	if s := h.job(id).State; s != api.JobRunning {
		h.t.Fatalf("job %d is %s", id, s)
	}
	return id
}

// TestSuspendResume: a running job is suspended whole, stays so until a
// resume is asked for and the leader resumes it; its walltime does not
// run while suspended (Late neither ends it nor counts the time), and
// what cannot be suspended or resumed is refused by name.
func TestSuspendResume(t *testing.T) {
	h := newHarness(t)
	id := h.running(2, 10*time.Second, nil)
	started := h.job(id).Started

	j := h.apply(Command{Act: Suspend{Job: id, By: "root", Reason: "suspended by root"}}).(*Job)
	since := t0.Add(time.Duration(h.idx) * time.Second)
	if j.Suspended == nil || j.Suspended.Since != since || j.Suspended.By != "root" || j.Suspended.ResumeWanted {
		t.Fatalf("suspension %+v", j.Suspended)
	}
	if _, err := h.st.Apply(100, Command{Version: SchemaVersion, Time: since, Act: Suspend{Job: id}}); !errors.Is(err, ErrNotSuspendable) || !errors.Is(err, ErrConflict) {
		t.Errorf("suspending twice: %v", err)
	}
	// Long past its walltime by the clock, it is not late while suspended.
	if late, next := h.st.Snapshot().Late(started.Add(time.Hour)); len(late) != 0 || !next.IsZero() {
		t.Errorf("late while suspended: %v, next %v", late, next)
	}
	h.apply(Command{Act: Timeout{Jobs: []uint64{id}}})
	if h.job(id).TimedOut {
		t.Fatal("a suspended job timed out")
	}
	j = h.apply(Command{Act: Resume{Job: id}}).(*Job)
	if j.Suspended == nil || !j.Suspended.ResumeWanted {
		t.Fatalf("resume asked: %+v (the leader resumes it once it fits)", j.Suspended)
	}
	h.apply(Command{Act: Resumed{Jobs: []uint64{id}}})
	got := h.job(id)
	resumedAt := t0.Add(time.Duration(h.idx) * time.Second)
	if got.Suspended != nil || got.SuspendedFor != resumedAt.Sub(since) {
		t.Fatalf("resumed: %+v, suspended for %v, want %v", got.Suspended, got.SuspendedFor, resumedAt.Sub(since))
	}
	// Its walltime ends that much later.
	if d := got.Deadline(); d != started.Add(10*time.Second+got.SuspendedFor) {
		t.Errorf("deadline %v", d)
	}
	if late, next := h.st.Snapshot().Late(started.Add(10 * time.Second)); len(late) != 0 || next != got.Deadline() {
		t.Errorf("at the unstretched walltime: late %v, next %v, want none and %v", late, next, got.Deadline())
	}
	if late, _ := h.st.Snapshot().Late(got.Deadline()); len(late) != 1 {
		t.Errorf("at the stretched walltime: late %v", late)
	}
	if _, err := h.st.Apply(101, Command{Version: SchemaVersion, Time: resumedAt, Act: Resume{Job: id}}); !errors.Is(err, ErrNotSuspendable) {
		t.Errorf("resuming a running job: %v", err)
	}

	pending := h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}).([]uint64)[0]
	if _, err := h.st.Apply(102, Command{Version: SchemaVersion, Time: resumedAt, Act: Suspend{Job: pending}}); !errors.Is(err, ErrNotSuspendable) {
		t.Errorf("suspending a pending job: %v", err)
	}
	// The assignments and the view carry it.
	h.apply(Command{Act: Suspend{Job: id}})
	if v := h.job(id); v.Suspended == nil || v.Suspended.By != "schedd" {
		t.Errorf("suspension without a sender: %+v", v.Suspended)
	}
	// A requeue starts a run with no suspension.
	j = h.job(id)
	requeueJob(j, t0, nil, "test", true)
	if j.Suspended != nil || j.SuspendedFor != 0 || !j.Warned.IsZero() {
		t.Errorf("requeued: %+v %v %v", j.Suspended, j.SuspendedFor, j.Warned)
	}
}

// TestWarnOnce: a job's warning signal falls due its Before ahead of its
// walltime's end; a Warn act adds it to the job's signal requests (to main1,
// or to every container) once a run, whoever sends it again.
func TestWarnOnce(t *testing.T) {
	h := newHarness(t)
	a := h.running(2, 6*time.Second, &Warning{Signal: "USR1", Before: 3 * time.Second})
	b := h.running(2, 6*time.Second, &Warning{Signal: "TERM", Before: 2 * time.Second, To: WarnAll})
	c := h.running(1, 6*time.Second, nil)
	ja, jb := h.job(a), h.job(b)
	if at := ja.WarnAt(); at != ja.Started.Add(3*time.Second) {
		t.Fatalf("warn at %v, started %v", at, ja.Started)
	}
	due, next := h.st.Snapshot().Warnings(ja.Started.Add(2 * time.Second))
	if len(due) != 0 || next != ja.WarnAt() {
		t.Fatalf("before: due %v next %v", due, next)
	}
	due, _ = h.st.Snapshot().Warnings(jb.Started.Add(4 * time.Second))
	if len(due) != 2 {
		t.Fatalf("due %v, want %d and %d", due, a, b)
	}
	h.apply(Command{Act: Warn{Jobs: []uint64{a, b, c}, Why: "walltime"}})
	h.apply(Command{Act: Warn{Jobs: []uint64{a, b, c}, Why: "walltime"}}) // a new leader's repeat
	ja, jb = h.job(a), h.job(b)
	if len(ja.Signals) != 1 || ja.Signals[0].Signal != int(syscall.SIGUSR1) || ja.Signals[0].Host != "main1" || ja.Warned.IsZero() {
		t.Errorf("a: signals %+v warned %v", ja.Signals, ja.Warned)
	}
	if len(jb.Signals) != 1 || jb.Signals[0].Signal != int(syscall.SIGTERM) || jb.Signals[0].Host != "" {
		t.Errorf("b: signals %+v", jb.Signals)
	}
	if n := len(h.job(c).Signals); n != 0 {
		t.Errorf("c asked for no warning: %d signals", n)
	}
	if due, next := h.st.Snapshot().Warnings(jb.Started.Add(5 * time.Second)); len(due) != 0 || !next.IsZero() {
		t.Errorf("after: due %v next %v", due, next)
	}
}

// TestSuspendActsNeedSchema11: the suspension and warning acts read back
// as themselves from an entry of schema 11, and have no entry in an
// older schema (a peer of the previous release would refuse the kind):
// writing one refuses by name.
func TestSuspendActsNeedSchema11(t *testing.T) {
	at := t0.Round(0)
	for _, a := range []Act{
		Suspend{Job: 3, Reason: "suspended by root", Resume: true, By: "root", Request: Request{ID: "r", By: "root"}},
		Resume{Job: 3, Request: Request{ID: "q"}},
		Resumed{Jobs: []uint64{3, 4}},
		Warn{Jobs: []uint64{3}, Why: "walltime"},
	} {
		if v := (&Command{Act: a}).NeedsSchema(); v != SuspendSchema {
			t.Errorf("%s: schema %d", a.Kind(), v)
		}
		b, err := json.Marshal(Command{Version: SchemaVersion, Time: at, Act: a})
		if err != nil {
			t.Fatalf("%s: %v", a.Kind(), err)
		}
		var back Command
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s: %v: %s", a.Kind(), err, b)
		}
		if !reflect.DeepEqual(back.Act, a) || !back.Time.Equal(at) {
			t.Errorf("%s reads back as %#v, want %#v", a.Kind(), back.Act, a)
		}
		for _, v := range []int{OldestSchema, SchemaVersion - 1} {
			_, err := json.Marshal(Command{Version: v, Time: at, Act: a})
			if !errors.Is(err, ErrNoOldForm) || !strings.Contains(err.Error(), a.Kind()) {
				t.Errorf("%s in schema %d: %v, want ErrNoOldForm naming it", a.Kind(), v, err)
			}
		}
	}
}
