package state

import (
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
)

// ids are the jobs' ids, in order.
func ids(jobs []*Job) []uint64 {
	out := []uint64{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

// scan is the plain reference the indexes must agree with: every job
// that keep takes, in id order.
func scan(v *Snapshot, keep func(*Job) bool) []uint64 {
	out := []uint64{}
	for _, j := range v.Jobs() {
		if keep(j) {
			out = append(out, j.ID)
		}
	}
	return out
}

// checkIndexes fails unless every indexed query of v answers what a
// scan of every job does.
func checkIndexes(t *testing.T, v *Snapshot, nodes []string) {
	t.Helper()
	for _, n := range nodes {
		want := scan(v, func(j *Job) bool {
			return j.Array == nil && !j.State.Terminal() && slices.ContainsFunc(j.Containers, func(c Container) bool { return c.Node == n })
		})
		if got := ids(v.NodeJobs(n)); !slices.Equal(got, want) {
			t.Errorf("NodeJobs(%s) = %v, a scan finds %v", n, got, want)
		}
	}
	for _, st := range append(slices.Clone(liveStates), api.JobCompleted, api.JobFailed, api.JobCancelled, api.JobNodeFail) {
		want := scan(v, func(j *Job) bool { return j.State == st })
		if got := ids(v.JobsIn(st)); !slices.Equal(got, want) {
			t.Errorf("JobsIn(%s) = %v, a scan finds %v", st, got, want)
		}
	}
	if got, want := ids(v.LiveJobs()), scan(v, func(j *Job) bool { return !j.State.Terminal() }); !slices.Equal(got, want) {
		t.Errorf("LiveJobs = %v, a scan finds %v", got, want)
	}
	for _, u := range []string{"alice", "bob"} {
		if got, want := ids(v.JobsOf(u)), scan(v, func(j *Job) bool { return j.User == u }); !slices.Equal(got, want) {
			t.Errorf("JobsOf(%s) = %v, a scan finds %v", u, got, want)
		}
	}
	for _, uid := range []int{1001, 1002, 1003} {
		want := len(scan(v, func(j *Job) bool { return j.UID == uid && queued(j) }))
		if got := v.QueuedOf(uid); got != want {
			t.Errorf("QueuedOf(%d) = %d, a scan finds %d", uid, got, want)
		}
		bytes := 0
		for _, j := range v.Jobs() {
			if j.UID == uid && queued(j) {
				bytes += inputSize(j)
			}
		}
		if got := v.QueuedInputOf(uid); got != bytes {
			t.Errorf("QueuedInputOf(%d) = %d, a scan finds %d", uid, got, bytes)
		}
	}
	if got, total := v.Queued(), len(scan(v, queued)); got != total {
		t.Errorf("Queued = %d, a scan finds %d", got, total)
	}
}

// fired reports whether any of ws's channels has fired.
func fired(ws map[<-chan struct{}]struct{}) bool {
	for ch := range ws {
		select {
		case <-ch:
			return true
		default:
		}
	}
	return false
}

// TestIndexesAgreeWithScans drives jobs through submit, placement,
// hold, end, a job array and a node failure, and checks after each step
// that every indexed query answers what a scan of every job does, also
// after a restore from a dump.
func TestIndexesAgreeWithScans(t *testing.T) {
	h := newHarness(t)
	for _, n := range []string{"n2", "n3"} {
		h.apply(Command{Act: Register{Node: &Node{Name: n, Addr: "10.0.0.9", Capacity: Resources{CPUMilli: 4000, Memory: 8 << 30}}}})
	}
	nodes := []string{"n1", "n2", "n3"}
	check := func(step string) {
		t.Helper()
		t.Run(step, func(t *testing.T) { checkIndexes(t, h.st.Snapshot(), nodes) })
	}
	submit := func(j *Job, user string, uid int) uint64 {
		j.User, j.UID = user, uid
		j.Spec.Command = []string{"echo", user, strconv.FormatUint(h.idx, 10)} // text of its own, for QueuedInputOf
		return h.apply(Command{Act: Submit{Jobs: []*Job{j}}}).([]uint64)[0]
	}
	a := submit(session(2), "alice", 1001)
	b := submit(session(1), "bob", 1002)
	c := submit(session(1), "alice", 1001)
	d := submit(session(1), "bob", 1002)
	arr := submit(arrayJob("1-5", 0), "alice", 1001)
	check("submitted")
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{
		{JobID: a, Nodes: []string{"n1", "n2"}}, {JobID: b, Nodes: []string{"n2"}}, {JobID: arr + 1, Nodes: []string{"n3"}}}}}})
	h.apply(Command{Act: Hold{Job: JobRef{ID: d}}})
	check("placed")
	h.report("n2", b, "main1", api.ContainerRunning, 0)
	h.report("n2", b, "main1", api.ContainerExited, 0)
	h.apply(Command{Act: Kill{Job: JobRef{ID: c}}})
	check("ended")
	h.apply(Command{Act: NodesDown{Down: &NodeDown{Nodes: []string{"n1"}}}})
	check("node down")

	d2 := New()
	if err := d2.Restore(h.st.Snapshot().Dump()); err != nil {
		t.Fatal(err)
	}
	t.Run("restored", func(t *testing.T) { checkIndexes(t, d2.Snapshot(), nodes) })
}

// TestNodeIndexWakesItsNodeOnly: a change to a job on one node moves
// that node's index and fires its watch; the other node's stays put and
// its watch silent, until a change reaches it too (a kill counts: its
// nodelet must stop the container).
func TestNodeIndexWakesItsNodeOnly(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Register{Node: &Node{Name: "n2", Addr: "10.0.0.2", Capacity: Resources{CPUMilli: 4000, Memory: 8 << 30}}}})
	a := h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}).([]uint64)[0]
	b := h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}).([]uint64)[0]
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: a, Nodes: []string{"n1"}}, {JobID: b, Nodes: []string{"n2"}}}}}})
	placed := h.idx
	h.report("n1", a, "main1", api.ContainerRunning, 0) // its own news: n1's index stays

	v := h.st.Snapshot()
	i1, ws1 := v.NodeIndex("n1")
	i2, ws2 := v.NodeIndex("n2")
	if i1 != placed || i2 != placed {
		t.Fatalf("after the plan at %d: n1 at %d, n2 at %d", placed, i1, i2)
	}
	h.apply(Command{Act: SignalJob{Signal: &Signal{JobID: a, Signal: int(syscall.SIGUSR1)}}})
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}) // queued: on no node
	if !fired(ws1) {
		t.Error("a signal to n1's job did not fire n1's watch")
	}
	if fired(ws2) {
		t.Error("a signal to n1's job, and a submit, fired n2's watch")
	}
	v = h.st.Snapshot()
	if i, _ := v.NodeIndex("n2"); i != placed {
		t.Errorf("n2's index moved to %d on other nodes' changes, want %d", i, placed)
	}
	if i, _ := v.NodeIndex("n1"); i != h.idx-1 {
		t.Errorf("n1's index %d, want the signal's %d", i, h.idx-1)
	}

	_, ws2 = v.NodeIndex("n2")
	h.apply(Command{Act: Kill{Job: JobRef{ID: b}}})
	killed := h.idx
	if !fired(ws2) {
		t.Fatal("killing n2's job did not fire n2's watch")
	}
	h.report("n2", b, "main1", api.ContainerKilled, 0)
	v = h.st.Snapshot()
	if len(v.NodeJobs("n2")) != 0 || v.Job(b).State != api.JobCancelled {
		t.Fatalf("job %d %s, n2 still has %v", b, v.Job(b).State, ids(v.NodeJobs("n2")))
	}
	if i, _ := v.NodeIndex("n2"); i != killed {
		t.Errorf("n2's index %d, want the kill's %d: its own report of the end is no news to it", i, killed)
	}

	// A touch (after a restore) moves every node's index.
	h.apply(Command{Act: Touch{}})
	for _, n := range []string{"n1", "n2"} {
		if i, _ := h.st.Snapshot().NodeIndex(n); i != h.idx {
			t.Errorf("after a touch at %d, %s is at %d", h.idx, n, i)
		}
	}
}

// TestNodeIndexOwnReports: a node's report about its own containers does
// not move its own index (its assignments query stays parked, ready for
// the next plan) as long as the report changes nothing else it is shown;
// what the report changes for other nodes, or beyond the reporting
// node's own containers' states, still moves theirs and its.
func TestNodeIndexOwnReports(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Register{Node: &Node{Name: "n2", Addr: "10.0.0.2", Capacity: Resources{CPUMilli: 4000, Memory: 8 << 30}}}})
	one := h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}).([]uint64)[0]
	other := h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}).([]uint64)[0]
	two := h.apply(Command{Act: Submit{Jobs: []*Job{session(3)}}}).([]uint64)[0] // main1 on n1, sub1 and sub2 on n2
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{
		{JobID: one, Nodes: []string{"n1"}}, {JobID: other, Nodes: []string{"n2"}}, {JobID: two, Nodes: []string{"n1", "n2", "n2"}}}}}})
	placed := h.idx
	index := func(n string) uint64 { i, _ := h.st.Snapshot().NodeIndex(n); return i }

	_, ws1 := h.st.Snapshot().NodeIndex("n1")
	h.report("n1", one, "main1", api.ContainerPreparing, 0)
	h.report("n1", one, "main1", api.ContainerRunning, 0)
	if fired(ws1) || index("n1") != placed {
		t.Errorf("n1's own reports on its one-container job moved its index to %d (placed at %d)", index("n1"), placed)
	}
	if st := h.st.Snapshot().Job(one).State; st != api.JobRunning {
		t.Fatalf("job %d is %s after its running report", one, st)
	}

	// Several nodes' reports in one entry (the leader's group commit).
	h.apply(Command{Act: Reports{Reports: []Report{
		{Node: "n1", Updates: []ContainerUpdate{{JobID: one, Host: "main1", State: api.ContainerExited}}},
		{Node: "n2", Updates: []ContainerUpdate{{JobID: other, Host: "main1", State: api.ContainerRunning}}},
	}}})
	if index("n1") != placed || index("n2") != placed {
		t.Errorf("two nodes' own reports in one entry moved n1 to %d, n2 to %d (placed at %d)", index("n1"), index("n2"), placed)
	}
	if st := h.st.Snapshot().Job(one).State; st != api.JobCompleted {
		t.Fatalf("job %d is %s after its exit", one, st)
	}

	// A session across nodes: n2's report moves n1 (another node's
	// container changed), not n2.
	_, ws1 = h.st.Snapshot().NodeIndex("n1")
	h.report("n2", two, "sub1", api.ContainerRunning, 0)
	if !fired(ws1) || index("n1") != h.idx {
		t.Errorf("n2's report on a session n1 shares left n1 at %d, want %d", index("n1"), h.idx)
	}
	if index("n2") != placed {
		t.Errorf("n2's own report moved n2 to %d", index("n2"))
	}

	// main1 ends on n1: the session ends (KillWanted), which n2 must
	// hear of; n1, whose containers of it have all ended, need not.
	was := index("n1")
	_, ws2 := h.st.Snapshot().NodeIndex("n2")
	h.report("n1", two, "main1", api.ContainerExited, 0)
	if !h.st.Snapshot().Job(two).KillWanted {
		t.Fatal("main1's end did not end the session")
	}
	if !fired(ws2) || index("n2") != h.idx {
		t.Errorf("the session's end, from n1's report at %d, left n2 at %d", h.idx, index("n2"))
	}
	if index("n1") != was {
		t.Errorf("n1's report of its last container's end moved n1 from %d to %d", was, index("n1"))
	}

	// A report that leaves some of the reporting node's containers of
	// the job running and ends the session tells that node to stop them.
	three := h.apply(Command{Act: Submit{Jobs: []*Job{session(2)}}}).([]uint64)[0] // main1 and sub1 on n1
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: three, Nodes: []string{"n1", "n1"}}}}}})
	h.report("n1", three, "sub1", api.ContainerRunning, 0)
	was = index("n1")
	h.report("n1", three, "main1", api.ContainerExited, 0)
	if index("n1") != h.idx {
		t.Errorf("main1's end on n1 with sub1 still running there left n1 at %d, want %d (was %d)", index("n1"), h.idx, was)
	}
}

// TestRoomMarks: what queued jobs alone do (a submit, a hold and a
// release, a queued job killed) leaves RoomMarks as they were, so that the scheduling loop may put its pass off behind a full
// cluster; a placement, a start, an end, a kill of a placed job and a
// node's change each give it new ones.
func TestRoomMarks(t *testing.T) {
	h := newHarness(t)
	room := h.st.Snapshot().RoomMarks()
	same := func(what string, want bool) {
		t.Helper()
		now := h.st.Snapshot().RoomMarks()
		if SameRoom(room, now) != want {
			t.Errorf("%s: RoomMarks the same %v, want %v", what, !want, want)
		}
		room = now
	}
	a := h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}).([]uint64)[0]
	same("a submit", true)
	b := h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}).([]uint64)[0]
	h.apply(Command{Act: Hold{Job: JobRef{ID: b}}})
	h.apply(Command{Act: Release{Job: JobRef{ID: b}}})
	same("another submit, held and released", true)
	c := h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}).([]uint64)[0]
	h.apply(Command{Act: Kill{Job: JobRef{ID: c}}})
	same("a queued job submitted and killed", true)
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: a, Nodes: []string{"n1"}}}}}})
	same("a placement", false)
	h.report("n1", a, "main1", api.ContainerRunning, 0)
	same("its start", false)
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	same("a submit while a job runs", true)
	h.report("n1", a, "main1", api.ContainerExited, 0)
	if st := h.st.Snapshot().Job(a).State; st != api.JobCompleted {
		t.Fatalf("job %d %s after its exit, want COMPLETED", a, st)
	}
	same("its end", false)
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: b, Nodes: []string{"n1"}}}}}})
	room = h.st.Snapshot().RoomMarks()
	h.apply(Command{Act: Kill{Job: JobRef{ID: b}}})
	same("a placed job killed", false)
	h.apply(Command{Act: Register{Node: &Node{Name: "n2", Addr: "10.0.0.2", Capacity: Resources{CPUMilli: 4000, Memory: 8 << 30}}}})
	same("a node registered", false)
}
