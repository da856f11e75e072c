package nodelet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/nodelet/report"
)

// TestReconcileWhileStoppingReportsNothing: an assignments answer that
// reaches a detaching nodelet after its task left the container running
// (the task gone from running, not finished) changes nothing; a live
// nodelet reports such a container lost. The detaching nodelet used to
// report it failed, ending a job whose container went on running.
func TestReconcileWhileStoppingReportsNothing(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := (&agent{log: log, running: map[key]*task{}, finished: map[key]bool{}}).wire()
	a.rep = report.New(func(context.Context, api.ContainerReport) error { return nil }, log, true)
	job := api.AssignedJob{ID: 1, Containers: []api.Container{
		{ContainerSpec: wire.ContainerToAPI(jobspec.Container{Host: "main1", Role: jobspec.RoleMain, Idx: 1}), State: api.ContainerRunning},
	}}
	as := api.Assignments{Assignments: []api.Assignment{{Job: job, Hosts: []string{"main1"}}}}

	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrDetach)
	a.recon.reconcile(ctx, as)
	if n := a.rep.Pending(); n != 0 {
		t.Fatalf("a detaching nodelet queued %d reports: %+v", n, a.rep.Queued())
	}
	a.recon.reconcile(context.Background(), as)
	if n := a.rep.Pending(); n != 1 || a.rep.Queued()[0].State != api.ContainerFailed {
		t.Fatalf("a live nodelet queued %+v, want the container reported failed (lost)", a.rep.Queued())
	}
}

// TestNoReconcileBeforeFirstAssignments: a restarted nodelet has
// re-attached to a running container and recorded one that ended while
// no nodelet ran, and schedd has not answered yet. A reconcile then (a
// lease granted at register, a task that ended) must neither stop the
// running container nor forget the ended one; once schedd's answer
// assigns both, nothing is stopped or reported lost. Reconciling against
// the empty assignments stopped every re-attached container and
// reported the ended one lost (TestAgentReattachesAfterRestart, now and
// then).
func TestNoReconcileBeforeFirstAssignments(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := (&agent{log: log, running: map[key]*task{}, finished: map[key]bool{}}).wire()
	a.rep = report.New(func(context.Context, api.ContainerReport) error { return nil }, log, true)
	running := &task{key: key{1, "main1", 0}, stop: make(chan struct{})}
	a.running[running.key] = running
	ended := key{2, "main1", 0}
	a.finished[ended] = true

	a.mu.Lock()
	a.recon.reconcileLocked(context.Background()) // as grant and an ended task do
	a.mu.Unlock()
	select {
	case <-running.stop:
		t.Fatal("a re-attached container was stopped before schedd's first assignments")
	default:
	}
	if !a.finished[ended] {
		t.Fatal("a container that ended was forgotten before schedd's first assignments")
	}

	var as api.Assignments
	for _, id := range []uint64{1, 2} {
		job := api.AssignedJob{ID: id, Containers: []api.Container{
			{ContainerSpec: wire.ContainerToAPI(jobspec.Container{Host: "main1", Role: jobspec.RoleMain, Idx: 1}), State: api.ContainerRunning},
		}}
		as.Assignments = append(as.Assignments, api.Assignment{Job: job, Hosts: []string{"main1"}})
	}
	a.recon.reconcile(context.Background(), as)
	select {
	case <-running.stop:
		t.Error("a re-attached container schedd assigns was stopped")
	default:
	}
	if n := a.rep.Pending(); n != 0 {
		t.Errorf("reports queued: %+v, want none (the ended container's exit is its task's to report)", a.rep.Queued())
	}
}

// TestReconcileAfterStateWentBack: schedd's state went back (a snapshot
// restored) to before two containers ended here and left the
// assignments: it shows one running and one assigned again. The nodelet
// tells each one's true end again (its exit code), never starts the
// assigned one a second time and never reports either lost.
func TestReconcileAfterStateWentBack(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := (&agent{log: log, running: map[key]*task{}, finished: map[key]bool{}}).wire()
	a.rep = report.New(func(context.Context, api.ContainerReport) error { return nil }, log, true)
	ended := map[uint64]api.ContainerUpdate{
		1: {JobID: 1, Host: "main1", State: api.ContainerExited, ExitCode: 3, CPUTime: time.Second, Session: "s"},
		2: {JobID: 2, Host: "main1", State: api.ContainerKilled, ExitCode: 137, Session: "s"},
	}
	for _, u := range ended {
		a.reports.send(&api.AssignedJob{SessionID: "s"}, u) // as the task's end does
	}
	a.rep = report.New(func(context.Context, api.ContainerReport) error { return nil }, log, true) // sent and acknowledged
	a.recon.reconcile(context.Background(), api.Assignments{Index: 10})                            // both left the assignments
	assign := func(idx uint64) {
		var as api.Assignments
		as.Index = idx
		for id, st := range map[uint64]api.ContainerState{1: api.ContainerRunning, 2: api.ContainerAssigned} {
			job := api.AssignedJob{ID: id, SessionID: "s", Containers: []api.Container{
				{ContainerSpec: wire.ContainerToAPI(jobspec.Container{Host: "main1", Role: jobspec.RoleMain, Idx: 1}), State: st},
			}}
			as.Assignments = append(as.Assignments, api.Assignment{Job: job, Hosts: []string{"main1"}})
		}
		a.recon.reconcile(context.Background(), as)
	}
	assign(4)
	if len(a.running) != 0 {
		t.Fatalf("the nodelet started %d containers that had ended here", len(a.running))
	}
	got := map[uint64]api.ContainerUpdate{}
	for _, u := range a.rep.Queued() {
		got[u.JobID] = u
	}
	if len(got) != 2 || got[1] != ended[1] || got[2] != ended[2] {
		t.Fatalf("queued %+v, want each container's true end %+v", a.rep.Queued(), ended)
	}
	assign(4) // the same answer again: told once
	if n := a.rep.Pending(); n != 2 {
		t.Fatalf("the same answer told the ends again: %d queued, want 2", n)
	}
}

// TestReconcileTellsEndOnlyAfterAck: a container that ended here is shown
// running by the answers that come before schedd applies its end: that
// is no going back, and nothing is sent again. Once schedd has shown it
// ended, an answer showing it running again (a restore raced the end)
// gets its end told again.
func TestReconcileTellsEndOnlyAfterAck(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := (&agent{log: log, running: map[key]*task{}, finished: map[key]bool{}}).wire()
	a.rep = report.New(func(context.Context, api.ContainerReport) error { return nil }, log, true)
	end := api.ContainerUpdate{JobID: 1, Host: "main1", State: api.ContainerExited, ExitCode: 5, Session: "s"}
	k := key{1, "main1", 0}
	a.reports.send(&api.AssignedJob{SessionID: "s"}, end)
	a.finished[k] = true
	a.rep = report.New(func(context.Context, api.ContainerReport) error { return nil }, log, true)
	answer := func(idx uint64, st api.ContainerState) {
		job := api.AssignedJob{ID: 1, SessionID: "s", Containers: []api.Container{
			{ContainerSpec: wire.ContainerToAPI(jobspec.Container{Host: "main1", Role: jobspec.RoleMain, Idx: 1}), State: st},
		}}
		a.recon.reconcile(context.Background(), api.Assignments{Index: idx, Assignments: []api.Assignment{{Job: job, Hosts: []string{"main1"}}}})
	}
	answer(5, api.ContainerRunning) // before schedd applied the end
	if n := a.rep.Pending(); n != 0 {
		t.Fatalf("an answer from before the end was applied had the end sent again: %+v", a.rep.Queued())
	}
	answer(6, api.ContainerExited)
	answer(7, api.ContainerRunning) // the state went back
	if q := a.rep.Queued(); len(q) != 1 || q[0] != end {
		t.Fatalf("after the state went back: queued %+v, want the end %+v again", q, end)
	}
}

// TestReconcileNoJobsYet: schedd's state has never given a job id (it
// started on an emptied data dir, before the backup is restored): its
// empty answer does not stop the containers running here. Once the
// state holds jobs, one it assigns keeps running, one it does not is
// stopped, and one whose id it gives another job (another session) is
// stopped, its reports not sent (schedd would read them as the other
// job's), and the other job is not taken for it.
func TestReconcileNoJobsYet(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := (&agent{log: log, running: map[key]*task{}, finished: map[key]bool{}}).wire()
	a.rep = report.New(func(context.Context, api.ContainerReport) error { return nil }, log, true)
	tasks := map[uint64]*task{}
	for id, sess := range map[uint64]string{1: "kept", 2: "gone", 3: "old"} {
		k := key{id, "main1", 0}
		tasks[id] = &task{key: k, job: api.AssignedJob{ID: id, SessionID: sess}, stop: make(chan struct{})}
		a.running[k] = tasks[id]
	}
	stopped := func(id uint64) bool {
		select {
		case <-tasks[id].stop:
			return true
		default:
			return false
		}
	}
	a.recon.reconcile(context.Background(), api.Assignments{Index: 3, NoJobsYet: true})
	for id := range tasks {
		if stopped(id) {
			t.Fatalf("job %d's container was stopped by a state that holds no job yet", id)
		}
	}
	var as api.Assignments
	as.Index = 9
	for id, sess := range map[uint64]string{1: "kept", 3: "new"} {
		job := api.AssignedJob{ID: id, SessionID: sess, Containers: []api.Container{
			{ContainerSpec: wire.ContainerToAPI(jobspec.Container{Host: "main1", Role: jobspec.RoleMain, Idx: 1}), State: api.ContainerRunning},
		}}
		as.Assignments = append(as.Assignments, api.Assignment{Job: job, Hosts: []string{"main1"}})
	}
	a.recon.reconcile(context.Background(), as)
	if stopped(1) || stopped(2) || !stopped(3) {
		t.Fatalf("stopped: 1 %v, 2 %v, 3 %v; want 3 (its id names another job) only, 2 (unassigned) announced first", stopped(1), stopped(2), stopped(3))
	}
	// Job 2, announced and taken, still unassigned by an answer asked
	// after: stopped.
	if err := a.rep.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		a.recon.queries++
		as.Index++
		a.recon.reconcile(context.Background(), as)
	}
	if stopped(1) || !stopped(2) {
		t.Fatalf("stopped: 1 %v, 2 %v; want 2 (unassigned after its announcement was taken)", stopped(1), stopped(2))
	}
	a.reports.send(&api.AssignedJob{SessionID: "old"}, api.ContainerUpdate{JobID: 3, Host: "main1", State: api.ContainerKilled, ExitCode: 143})
	a.reports.send(&api.AssignedJob{SessionID: "gone"}, api.ContainerUpdate{JobID: 2, Host: "main1", State: api.ContainerKilled, ExitCode: 143})
	if q := a.rep.Queued(); len(q) != 1 || q[0].JobID != 2 {
		t.Fatalf("queued %+v; want job 2's end only (job 3's id names another job now)", q)
	}
}

// TestReconcileAnnouncesBeforeStopping: a container running here that
// schedd's state (holding jobs) does not assign is first reported
// running under its job's session, not stopped: a state restored from a
// backup taken before the job started holds it queued and adopts it.
// It is stopped only once an answer to a query asked after schedd took
// that report still lacks it; one adopted (assigned again) never is.
func TestReconcileAnnouncesBeforeStopping(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := (&agent{log: log, running: map[key]*task{}, finished: map[key]bool{}}).wire()
	taken := true
	a.rep = report.New(func(context.Context, api.ContainerReport) error {
		if !taken {
			return context.DeadlineExceeded
		}
		return nil
	}, log, true)
	started := time.Now().Add(-time.Minute)
	tasks := map[uint64]*task{}
	for id, sess := range map[uint64]string{1: "adopted", 2: "unknown"} {
		k := key{id, "main1", 0}
		tasks[id] = &task{key: k, job: api.AssignedJob{ID: id, SessionID: sess}, stop: make(chan struct{}), startedAt: started}
		a.running[k] = tasks[id]
	}
	stopped := func(id uint64) bool {
		select {
		case <-tasks[id].stop:
			return true
		default:
			return false
		}
	}
	answer := func(index uint64, assign bool) {
		a.recon.queries++
		as := api.Assignments{Index: index, Assignments: []api.Assignment{{Job: api.AssignedJob{ID: 9, SessionID: "other"}}}}
		if assign {
			as.Assignments = append(as.Assignments, api.Assignment{Job: api.AssignedJob{ID: 1, SessionID: "adopted", Containers: []api.Container{
				{ContainerSpec: wire.ContainerToAPI(jobspec.Container{Host: "main1", Role: jobspec.RoleMain, Idx: 1}), State: api.ContainerRunning}}}, Hosts: []string{"main1"}})
		}
		a.recon.reconcile(context.Background(), as)
	}
	taken = false
	answer(10, false)
	q := a.rep.Queued()
	if stopped(1) || stopped(2) || len(q) != 2 {
		t.Fatalf("unassigned: stopped 1 %v, 2 %v, queued %+v; want neither stopped, both announced", stopped(1), stopped(2), q)
	}
	for _, u := range q {
		if u.State != api.ContainerRunning || u.Session != tasks[u.JobID].job.SessionID || !u.At.Equal(started) {
			t.Fatalf("announced %+v; want running, its session and start", u)
		}
	}
	// Not taken yet (schedd unreachable): never stopped, whatever the
	// answers say.
	for i := range uint64(3) {
		answer(11+i, false)
	}
	if stopped(1) || stopped(2) || a.rep.Pending() != 2 {
		t.Fatalf("announcement not taken: stopped 1 %v, 2 %v, queued %d; want none stopped, announced once", stopped(1), stopped(2), a.rep.Pending())
	}
	taken = true
	if err := a.rep.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	answer(20, false) // asked before schedd took it
	if stopped(1) || stopped(2) {
		t.Fatalf("stopped on an answer to a query asked before the announcement was taken: 1 %v, 2 %v", stopped(1), stopped(2))
	}
	answer(21, true) // job 1 adopted, job 2 not
	if stopped(1) || !stopped(2) {
		t.Fatalf("after the announcement was taken: stopped 1 %v, 2 %v; want 2 (not adopted) only", stopped(1), stopped(2))
	}
	answer(22, true)
	if stopped(1) {
		t.Fatal("an adopted container was stopped")
	}
}

// TestReconcileTellsKeptEndsInAdoptionWindow: in the adoption window after
// a restore into an empty state (AdoptUntil set), the nodelet tells once
// the ends it keeps of containers the answer does not assign (their jobs
// may be queued in the restored state, from before they ran), and
// announces an unassigned running container with its copy of the job
// (a job submitted after the backup is adopted from it). Outside a
// window it does neither.
func TestReconcileTellsKeptEndsInAdoptionWindow(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := (&agent{log: log, running: map[key]*task{}, finished: map[key]bool{}}).wire()
	a.rep = report.New(func(context.Context, api.ContainerReport) error { return nil }, log, true)
	end := api.ContainerUpdate{JobID: 1, Host: "main1", State: api.ContainerExited, ExitCode: 0, Session: "s1",
		Started: time.Now().Add(-time.Minute), At: time.Now()}
	a.reports.send(&api.AssignedJob{ID: 1, SessionID: "s1", User: "nobody", UID: 65534, Cwd: "/tmp"}, end)
	a.rep = report.New(func(context.Context, api.ContainerReport) error { return nil }, log, true) // sent and acknowledged
	a.recon.reconcile(context.Background(), api.Assignments{Index: 10})
	if n := a.rep.Pending(); n != 0 {
		t.Fatalf("outside an adoption window: %d queued, want none", n)
	}
	k := key{2, "main1", 0}
	a.running[k] = &task{key: k, job: api.AssignedJob{ID: 2, SessionID: "s2", User: "nobody"}, stop: make(chan struct{})}
	window := time.Now().Add(time.Minute)
	for range 2 {
		a.recon.reconcile(context.Background(), api.Assignments{Index: 3, AdoptUntil: window})
	}
	var ends, announced int
	for _, u := range a.rep.Queued() {
		switch {
		case u.JobID == 1:
			// The kept end with the node's copy of its job: a job
			// submitted after the backup that ended is recorded from it.
			if j := u.Job; j == nil || j.ID != 1 || j.SessionID != "s1" || j.UID != 65534 || j.Cwd != "/tmp" {
				t.Fatalf("kept end told %+v with job copy %+v; want the copy it ended with", u, u.Job)
			}
			if u.Job = nil; u != end {
				t.Fatalf("kept end told %+v, want %+v", u, end)
			}
			ends++
		case u.JobID == 2 && u.State == api.ContainerRunning && u.Job != nil && u.Job.User == "nobody":
			announced++
		default:
			t.Fatalf("queued %+v; want the kept end of job 1 and job 2 announced with its copy", u)
		}
	}
	if ends != 1 || announced != 1 {
		t.Fatalf("in the adoption window: %d kept ends told, %d announcements with the job; want 1 and 1", ends, announced)
	}
}

// TestOutcomeLogBounds: the outcome log keeps the last maxOutcomes ends,
// the ends of one job's containers share one copy of the job, a copy
// larger than maxOutcomeJob is not kept (the end is), and the copies
// together stay within maxOutcomeJobs, the oldest ends losing theirs
// first.
func TestOutcomeLogBounds(t *testing.T) {
	// A full report of kept ends with their copies stays within half of
	// what schedd takes in one request (4 MiB).
	if n := report.MaxBatch * maxOutcomeJob; n > 2<<20 {
		t.Fatalf("a report of %d ends with copies of %d bytes: %d bytes, over 2 MiB", report.MaxBatch, maxOutcomeJob, n)
	}
	var o outcomeLog
	job := func(id uint64, script int) *api.AssignedJob {
		j := &api.AssignedJob{ID: id, SessionID: fmt.Sprint("s", id), User: "nobody"}
		j.Spec.Workdir = strings.Repeat("x", script)
		return j
	}
	u := func(id uint64, host string) api.ContainerUpdate {
		return api.ContainerUpdate{JobID: id, Host: host, State: api.ContainerExited}
	}
	o.put(key{1, "main1", 0}, job(1, 10), u(1, "main1"))
	o.put(key{1, "sub1", 0}, job(1, 10), u(1, "sub1"))
	o.put(key{2, "main1", 0}, job(2, maxOutcomeJob), u(2, "main1")) // too large
	if len(o.copies) != 1 || o.byKey[key{1, "main1", 0}].copy != o.byKey[key{1, "sub1", 0}].copy {
		t.Fatalf("copies %d; want one, shared by job 1's two ends", len(o.copies))
	}
	for k, got := range o.all() {
		if want := k.job == 1; (got.Job != nil) != want || got.Job != nil && got.Job.User != "nobody" {
			t.Fatalf("end of %+v told with copy %+v; want one only for job 1", k, got.Job)
		}
	}
	big := maxOutcomeJob - 1024
	for id := uint64(3); id < 3+maxOutcomes; id++ {
		o.put(key{id, "main1", 0}, job(id, big), u(id, "main1"))
		if o.bytes > maxOutcomeJobs {
			t.Fatalf("after job %d: copies hold %d bytes, over %d", id, o.bytes, maxOutcomeJobs)
		}
	}
	if len(o.order) != maxOutcomes || len(o.byKey) != maxOutcomes {
		t.Fatalf("%d ends kept (%d by key), want %d", len(o.order), len(o.byKey), maxOutcomes)
	}
	if _, ok := o.byKey[key{1, "main1", 0}]; ok {
		t.Fatal("the oldest end is still kept past the bound")
	}
	last := o.byKey[key{2 + maxOutcomes, "main1", 0}]
	if last.copy == nil {
		t.Fatal("the newest end lost its copy; the oldest lose theirs first")
	}
	n := 0
	for _, e := range o.byKey {
		if e.copy != nil {
			n++
		}
	}
	if n != len(o.copies) || n == 0 {
		t.Fatalf("%d ends hold copies, %d copies kept; want the same, and some", n, len(o.copies))
	}
}
