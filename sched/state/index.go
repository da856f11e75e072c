package state

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/hashicorp/go-memdb"

	"github.com/troupe-hpc/troupe/internal/lifecycle"
)

// Indexes over the jobs table, so that the questions asked often cost
// what they answer, not what the state holds: a node's assignments
// (index "node"), the jobs in some states ("state"), one user's jobs
// ("user"), one user's queued jobs ("queued"). They are memdb's, kept in
// memory only: neither the raft log (Command) nor a snapshot (Dump)
// carries them, and a restore rebuilds them.
//
// The node_index table is derived the same way: for each node, the raft
// index of the last change to the jobs it runs (a job placed on it,
// changed, or leaving it). It is what a node's assignments query answers
// and blocks on, so that a change wakes the nodelets whose work it
// changes and no others: not even the node whose own report made it,
// when the report changed nothing but what that node said (ownEcho).

const (
	tableNodeIndex   = "node_index"
	tableQueueCounts = "queue_counts"
)

// liveStates are the states of a job that has not ended.
var liveStates = []lifecycle.JobState{lifecycle.JobPending, lifecycle.JobHeld, lifecycle.JobScheduled, lifecycle.JobPreparing, lifecycle.JobRunning}

// nodeIndex is the jobs table's multi-value index by the nodes a live
// job's containers are placed on (a job that has not ended; an array's
// own row runs nothing and is never in it).
type nodeIndex struct{}

// liveNodes are the distinct nodes j's containers are placed on, if j
// has not ended.
func liveNodes(j *Job) []string {
	if j == nil || j.Array != nil || j.State.Terminal() {
		return nil
	}
	var out []string
	for _, c := range j.Containers {
		if c.Node != "" && !slices.Contains(out, c.Node) {
			out = append(out, c.Node)
		}
	}
	return out
}

func (nodeIndex) FromObject(raw any) (bool, [][]byte, error) {
	nodes := liveNodes(raw.(*Job))
	if len(nodes) == 0 {
		return false, nil, nil
	}
	out := make([][]byte, len(nodes))
	for i, n := range nodes {
		out[i] = append([]byte(n), 0)
	}
	return true, out, nil
}

func (nodeIndex) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("node index wants a node name, got %d arguments", len(args))
	}
	n, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("node index wants a string, got %T", args[0])
	}
	return append([]byte(n), 0), nil
}

// liveUIDIndex is the jobs table's index by the uid of a live job with
// containers placed (liveNodes): whose containers a user's other jobs
// may reach (Snapshot.LiveJobsOfUID).
type liveUIDIndex struct{}

func (liveUIDIndex) FromObject(raw any) (bool, []byte, error) {
	j := raw.(*Job)
	if len(liveNodes(j)) == 0 {
		return false, nil, nil
	}
	return true, append([]byte(uidKey(j.UID)), 0), nil
}

// reachUIDIndex is the jobs table's index by the uid of a live job with
// a container that has a routed address (api.Container.Reach) and has
// not ended: the addresses a user's other jobs' nodes let in
// (Snapshot.ReachJobsOfUID). Empty where default networks are NAT only,
// so that looking a user up there costs nothing.
type reachUIDIndex struct{ liveUIDIndex }

func (reachUIDIndex) FromObject(raw any) (bool, []byte, error) {
	j := raw.(*Job)
	if len(liveNodes(j)) == 0 || !slices.ContainsFunc(j.Containers, func(c Container) bool { return c.Reach != "" && !c.State.Ended() }) {
		return false, nil, nil
	}
	return true, append([]byte(uidKey(j.UID)), 0), nil
}

func (liveUIDIndex) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("live uid index wants a uid, got %d arguments", len(args))
	}
	uid, ok := args[0].(int)
	if !ok {
		return nil, fmt.Errorf("live uid index wants an int, got %T", args[0])
	}
	return append([]byte(uidKey(uid)), 0), nil
}

// reachChanged lists the nodes of the containers whose routed default
// address (api.Container.Reach, while the container and its job live)
// differs between before and after.
func reachChanged(before, after *Job) []string {
	reach := func(j *Job) map[string]string { // host → address@node
		out := map[string]string{}
		if j == nil || j.State.Terminal() {
			return out
		}
		for _, c := range j.Containers {
			if c.Reach != "" && !c.State.Ended() {
				out[c.Host] = c.Reach + "@" + c.Node
			}
		}
		return out
	}
	b, a := reach(before), reach(after)
	var nodes []string
	note := func(v string) {
		if _, n, _ := strings.Cut(v, "@"); !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	for h, v := range b {
		if a[h] != v {
			note(v)
		}
	}
	for h, v := range a {
		if b[h] != v {
			note(v)
		}
	}
	return nodes
}

// liveOfUID iterates the live jobs of uid with containers placed.
func liveOfUID(txn *memdb.Txn, uid int) ([]*Job, error) {
	return jobsBy(txn, "live_uid", uid)
}

// ReachJobsOfUID returns the live jobs of user uid with a container
// that has a routed address, in id order.
func (v *jobReads) ReachJobsOfUID(uid int) []*Job {
	return slices.Collect(v.each("reach_uid", uid))
}

// queued reports whether j counts against the queue limits
// (max_queued_per_user, max_queued): PENDING or HELD, a job array once,
// by its own row, not by its elements'.
func queued(j *Job) bool {
	return (j.State == lifecycle.JobPending || j.State == lifecycle.JobHeld) && j.ArrayID == 0
}

// queueCount is a row of queue_counts: how many queued jobs (queued)
// the key holds, "total" all users', "uid/N" one user's, and the text
// they hold together (Bytes: jobspec.Job.InputSize, what the jobs cost
// schedd to keep). Like node_index it is derived from the jobs in every
// Apply and rebuilt on a restore, so that submit's limit checks cost one
// lookup.
type queueCount struct {
	Key   string
	N     int
	Bytes int
}

const totalKey = "total"

func uidKey(uid int) string { return fmt.Sprintf("uid/%d", uid) }

var queueCountsTable = &memdb.TableSchema{Name: tableQueueCounts, Indexes: map[string]*memdb.IndexSchema{
	"id": {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Key"}},
}}

// inputSize is what j's text costs schedd to keep (measured at
// admission).
func inputSize(j *Job) int { return j.InputBytes }

// queueMove is a change to a queue_counts row.
type queueMove struct{ n, bytes int }

// addQueued moves the total's and j's user's counts by sign (+1 or -1)
// times j.
func addQueued(delta map[string]queueMove, j *Job, sign int) {
	b := sign * inputSize(j)
	for _, k := range []string{totalKey, uidKey(j.UID)} {
		m := delta[k]
		m.n += sign
		m.bytes += b
		delta[k] = m
	}
}

// countQueued moves the queue counts by what the transaction changed.
// A row queued before and after the change moves nothing: its user and
// its spec (whose text the counts hold) never change.
func countQueued(txn *memdb.Txn) error {
	delta := map[string]queueMove{}
	for _, ch := range txn.Changes() {
		if ch.Table != tableJobs {
			continue
		}
		before, _ := ch.Before.(*Job)
		after, _ := ch.After.(*Job)
		bq, aq := before != nil && queued(before), after != nil && queued(after)
		if bq && aq && before.UID == after.UID {
			continue
		}
		if bq {
			addQueued(delta, before, -1)
		}
		if aq {
			addQueued(delta, after, 1)
		}
	}
	for k, d := range delta {
		if d == (queueMove{}) {
			continue
		}
		c := queueCount{Key: k, N: d.n, Bytes: d.bytes}
		if raw, err := txn.First(tableQueueCounts, "id", k); err != nil {
			return err
		} else if raw != nil {
			c.N += raw.(*queueCount).N
			c.Bytes += raw.(*queueCount).Bytes
		}
		var err error
		if c.N <= 0 {
			_, err = txn.DeleteAll(tableQueueCounts, "id", k)
		} else {
			err = txn.Insert(tableQueueCounts, &c)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// rebuildQueueCounts fills queue_counts from a restored state's jobs.
func rebuildQueueCounts(txn *memdb.Txn, d Dump) error {
	delta := map[string]queueMove{}
	for _, j := range d.Jobs {
		if queued(j) {
			addQueued(delta, j, 1)
		}
	}
	for k, m := range delta {
		if err := txn.Insert(tableQueueCounts, &queueCount{Key: k, N: m.n, Bytes: m.bytes}); err != nil {
			return err
		}
	}
	return nil
}

func (v *jobReads) queueCount(key string) queueCount {
	raw, err := v.txn.First(tableQueueCounts, "id", key)
	if err != nil {
		panic(err)
	}
	if raw == nil {
		return queueCount{Key: key}
	}
	return *raw.(*queueCount)
}

// nodeIndexEntry is a node's row in node_index.
type nodeIndexEntry struct {
	Node  string
	Index uint64
}

var nodeIndexTable = &memdb.TableSchema{Name: tableNodeIndex, Indexes: map[string]*memdb.IndexSchema{
	"id": {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Node"}},
}}

// bumpNodes moves to index the node_index rows of the nodes whose jobs
// the transaction changed: the live nodes of each changed job before and
// after, and of a node registered for the first time. A touch (after a
// restore) moves every node's. reporters are the nodes whose own reports
// the transaction applied: a change that is only the echo of a node's
// report (ownEcho) does not move that node's row, so that its
// assignments query, parked until its row moves, is not answered with
// what it has just said and is still parked when a plan comes.
func bumpNodes(txn *memdb.Txn, index uint64, all bool, reporters []string) error {
	nodes := map[string]bool{}
	peers := map[int][]string{} // by uid: the nodes of its containers whose routed address changed
	for _, ch := range txn.Changes() {
		if ch.Table == tableNodes && ch.Before == nil {
			// A new node gets its row now, so that its watch is its
			// own from the first query on.
			nodes[ch.After.(*Node).Name] = true
		}
		if ch.Table != tableJobs {
			continue
		}
		before, _ := ch.Before.(*Job)
		after, _ := ch.After.(*Job)
		live := liveNodes(before)
		for _, n := range liveNodes(after) {
			if !slices.Contains(live, n) {
				live = append(live, n)
			}
		}
		for _, n := range live { // each node once: ownEcho compares whole jobs
			if !nodes[n] && !(slices.Contains(reporters, n) && ownEcho(before, after, n)) {
				nodes[n] = true
			}
		}
		// A container's routed address came or went: the nodes of its
		// user's other jobs let it in (or no longer), by their
		// assignments' Peers.
		if changed := reachChanged(before, after); len(changed) > 0 {
			uid := 0
			if after != nil {
				uid = after.UID
			} else {
				uid = before.UID
			}
			peers[uid] = append(peers[uid], changed...)
		}
	}
	for uid, changed := range peers {
		jobs, err := liveOfUID(txn, uid)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			for _, n := range liveNodes(j) {
				// A node's Peers leave out its own containers: a
				// change there alone does not move them.
				if slices.ContainsFunc(changed, func(c string) bool { return c != n }) {
					nodes[n] = true
				}
			}
		}
	}
	if all {
		for _, t := range []string{tableNodes, tableNodeIndex} {
			it, err := txn.Get(t, "id")
			if err != nil {
				return err
			}
			for raw := it.Next(); raw != nil; raw = it.Next() {
				switch v := raw.(type) {
				case *Node:
					nodes[v.Name] = true
				case *nodeIndexEntry:
					nodes[v.Node] = true
				}
			}
		}
	}
	for n := range nodes {
		if err := txn.Insert(tableNodeIndex, &nodeIndexEntry{Node: n, Index: index}); err != nil {
			return err
		}
	}
	return nil
}

// ownEcho tells whether a job's change from before to after is only
// what node's own report said: the state, exit code, message and usage
// of node's containers, and what the job derives from those alone (its
// state, start and end, exit code, reason, usage), which the node knows,
// having reported them. KillWanted counts among those only once every
// container of the job on node has ended: a session that ends because of
// the report must still reach the node's other containers. Signals,
// another node's containers, the requeue count or anything else that
// changed makes it no echo; so does a change to a field this does not
// name, so that a field added later wakes the node as before. A job that
// ends with the report leaves the node's assignments unannounced: the
// node ended it, and keeps nothing of it running.
func ownEcho(before, after *Job, node string) bool {
	if before == nil || after == nil || len(before.Containers) != len(after.Containers) {
		return false
	}
	b := *before
	b.State, b.Started, b.Ended, b.ExitCode, b.Reason = after.State, after.Started, after.Ended, after.ExitCode, after.Reason
	b.CPUTime, b.MemPeak, b.ModifyIndex = after.CPUTime, after.MemPeak, after.ModifyIndex
	b.Containers = slices.Clone(before.Containers)
	ownEnded := true
	for i := range b.Containers {
		c, a := &b.Containers[i], &after.Containers[i]
		if c.Node != node || a.Node != node || c.Host != a.Host {
			continue
		}
		c.State, c.ExitCode, c.Message, c.CPUTime, c.MemPeak, c.Ended, c.Reach = a.State, a.ExitCode, a.Message, a.CPUTime, a.MemPeak, a.Ended, a.Reach
		ownEnded = ownEnded && a.State.Ended()
	}
	if ownEnded {
		b.KillWanted = after.KillWanted
	}
	return reflect.DeepEqual(&b, after)
}

// rebuildNodeIndex fills node_index after a restore: every node, and
// every node a live job runs on, at index (the restored state's last).
func rebuildNodeIndex(txn *memdb.Txn, d Dump, index uint64) error {
	nodes := map[string]bool{}
	for _, n := range d.Nodes {
		nodes[n.Name] = true
	}
	for _, j := range d.Jobs {
		for _, n := range liveNodes(j) {
			nodes[n] = true
		}
	}
	for n := range nodes {
		if err := txn.Insert(tableNodeIndex, &nodeIndexEntry{Node: n, Index: index}); err != nil {
			return err
		}
	}
	return nil
}

// NodeJobs returns the jobs that have not ended with a container placed
// on node, in id order: what the node's assignments come from. Its cost
// follows those jobs alone, whatever else the state holds.
func (v *jobReads) NodeJobs(node string) []*Job {
	return slices.Collect(v.each("node", node))
}

// NodeIndex is the index a node's assignments answer carries: the raft
// index of the last change to the jobs it runs, or of the settings
// (partition limits the answer holds), whichever is later; with a watch
// set that fires when either changes again, and not when other nodes'
// jobs do. (A name no node was ever registered under has no row of its
// own: its watch is a parent's and fires on other nodes' changes too,
// waking its query for nothing.)
func (v *jobReads) NodeIndex(node string) (uint64, memdb.WatchSet) {
	ws := memdb.NewWatchSet()
	ch, raw, err := v.txn.FirstWatch(tableNodeIndex, "id", node)
	if err != nil {
		panic(err)
	}
	ws.Add(ch)
	var idx uint64
	if raw != nil {
		idx = raw.(*nodeIndexEntry).Index
	}
	ch, raw, err = v.txn.FirstWatch(tableIndexes, "id", tableSettings)
	if err != nil {
		panic(err)
	}
	if raw != nil {
		// Without a row (a state never configured: schedd configures
		// at start) the channel would be a parent's, firing on every
		// change to any table.
		ws.Add(ch)
		idx = max(idx, raw.(*indexEntry).Index)
	}
	return idx, ws
}

// RoomMarks marks what placed jobs hold and nodes offer: marks of
// another snapshot (SameRoom) differ when a job entered, changed in or
// left a placed state (SCHEDULED, PREPARING, RUNNING: a placement, a
// start, an end, a kill) between the two, or the nodes, the settings or
// the reservations changed; not when only queued jobs did (a submit, a
// hold or release, a queued job killed). They are watch channels of this
// snapshot's rows (nil where there is none): a mark may differ for a
// change that is none of these (a sibling's), never stay for one that
// is.
func (v *jobReads) RoomMarks() []<-chan struct{} {
	marks := make([]<-chan struct{}, 0, 6)
	for _, st := range []lifecycle.JobState{lifecycle.JobScheduled, lifecycle.JobPreparing, lifecycle.JobRunning} {
		it, err := v.txn.Get(tableJobs, "state", string(st))
		if err != nil {
			panic(err)
		}
		var ch <-chan struct{}
		if it.Next() != nil { // else the channel would be a parent's, moved by any job's change
			ch = it.WatchCh()
		}
		marks = append(marks, ch)
	}
	for _, t := range []string{tableNodes, tableSettings, tableReservations} {
		ch, raw, err := v.txn.FirstWatch(tableIndexes, "id", t)
		if err != nil {
			panic(err)
		}
		if raw == nil {
			ch = nil // a parent's: any table's change would move it
		}
		marks = append(marks, ch)
	}
	return marks
}

// SameRoom tells whether two snapshots' RoomMarks are the same: nothing
// that placed jobs hold or nodes offer changed between them.
func SameRoom(a, b []<-chan struct{}) bool { return slices.Equal(a, b) }

// JobsIn returns the jobs in any of states (each named once), in id
// order: each state's run of the index is in id order, merged here.
func (v *jobReads) JobsIn(states ...lifecycle.JobState) []*Job {
	runs := make([][]*Job, 0, len(states))
	n := 0
	for _, st := range states {
		it, err := v.txn.Get(tableJobs, "state", string(st))
		if err != nil {
			panic(err)
		}
		var run []*Job
		for raw := it.Next(); raw != nil; raw = it.Next() {
			run = append(run, raw.(*Job))
		}
		if len(run) > 0 {
			runs = append(runs, run)
			n += len(run)
		}
	}
	if len(runs) == 1 {
		return runs[0]
	}
	out := make([]*Job, 0, n)
	for len(out) < n {
		k := 0
		for i := 1; i < len(runs); i++ {
			if len(runs[k]) == 0 || len(runs[i]) > 0 && runs[i][0].ID < runs[k][0].ID {
				k = i
			}
		}
		out = append(out, runs[k][0])
		runs[k] = runs[k][1:]
	}
	return out
}

// LiveJobs returns the jobs that have not ended, in id order: what the
// scheduler plans with, whatever number of ended jobs wait to be purged.
func (v *jobReads) LiveJobs() []*Job { return v.JobsIn(liveStates...) }

// JobsOf returns user's jobs (by name), in id order.
func (v *jobReads) JobsOf(user string) []*Job {
	return slices.Collect(v.each("user", user))
}

// QueuedOf is how many jobs uid has queued (PENDING or HELD; a job
// array once): one lookup, whatever the queue holds.
func (v *jobReads) QueuedOf(uid int) int { return v.queueCount(uidKey(uid)).N }

// QueuedInputOf is how many bytes of job text (jobspec.Job.InputSize)
// uid's queued jobs hold together: one lookup.
func (v *jobReads) QueuedInputOf(uid int) int { return v.queueCount(uidKey(uid)).Bytes }

// Queued is how many jobs all users have queued (PENDING or HELD; a job
// array once, by its own row).
func (v *jobReads) Queued() int { return v.queueCount(totalKey).N }
