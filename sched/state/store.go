// Package state is schedd's replicated state: jobs and nodes in
// hashicorp/go-memdb tables. Only the raft FSM writes it (through Apply),
// so every replica that applies the same log holds the same state. Readers
// take a Snapshot, a consistent read-only view that also yields watch
// channels for blocking queries.
//
// It owns its schema. Its rows (Job, Node, row.go) are what the tables
// hold, what the raft log's commands (Command, one typed act each,
// command.go) carry and what snapshots keep: only what is replicated, in
// resolved values (a container's millicores, memory, GPU; the job's one
// walltime) and in the package's own types. They are not the API's views
// (internal/api) nor job files (jobspec): admission builds a row (sched's
// admit.go) and schedd converts it to its view when it answers
// (sched/view.go), adding there what it derives or what only the leader
// knows. Rows and entries of older schemas still load (legacy.go).
//
// Objects handed out are shared with the store: callers must not modify
// them. Writers copy before they change (see Job.clone).
//
// It must not import sched (the controller), sched/raftlog, nodelet/...,
// internal/client, internal/api, jobspec or sched/admission (the submit
// policy); cmd/layout_test.go checks the last three.
package state

import (
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/go-memdb"
)

const (
	tableJobs     = "jobs"
	tableNodes    = "nodes"
	tableIndexes  = "indexes"
	tableSettings = "settings"
	tableUsage    = "usage"
	tableTokens   = "tokens"
	tableServers  = "servers"
)

// indexEntry records the raft index of a table's last change.
type indexEntry struct {
	Table string `json:"table"`
	Index uint64 `json:"index"`
}

var schema = &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
	tableJobs: {Name: tableJobs, Indexes: map[string]*memdb.IndexSchema{
		"id": {Name: "id", Unique: true, Indexer: &memdb.UintFieldIndex{Field: "ID"}},
		// A submit's retry is known by its user and request id together
		// (schema 7 on); by its request id alone as a prefix in older
		// entries' replay (requests.go).
		"user_request": {Name: "user_request", AllowMissing: true, Indexer: userRequestIndex{}},
		"element":      {Name: "element", Unique: true, AllowMissing: true, Indexer: elementIndex{}},
		// In memory only (index.go): what the queries below look up by.
		"node":      {Name: "node", AllowMissing: true, Indexer: nodeIndex{}},
		"state":     {Name: "state", AllowMissing: true, Indexer: &memdb.StringFieldIndex{Field: "State"}},
		"user":      {Name: "user", AllowMissing: true, Indexer: &memdb.StringFieldIndex{Field: "User"}},
		"live_uid":  {Name: "live_uid", AllowMissing: true, Indexer: liveUIDIndex{}},
		"reach_uid": {Name: "reach_uid", AllowMissing: true, Indexer: reachUIDIndex{}},
	}},
	tableTokens: {Name: tableTokens, Indexes: map[string]*memdb.IndexSchema{
		"id":   {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}},
		"hash": {Name: "hash", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Hash"}},
	}},
	tableServers: {Name: tableServers, Indexes: map[string]*memdb.IndexSchema{
		"id": {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}},
	}},
	tableNodes: {Name: tableNodes, Indexes: map[string]*memdb.IndexSchema{
		"id": {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Name"}},
	}},
	tableIndexes: {Name: tableIndexes, Indexes: map[string]*memdb.IndexSchema{
		"id": {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Table"}},
	}},
	tableSettings: {Name: tableSettings, Indexes: map[string]*memdb.IndexSchema{
		"id": {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}},
	}},
	tableUsage: {Name: tableUsage, Indexes: map[string]*memdb.IndexSchema{
		"id": {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Key"}},
	}},
	tableRequests:     requestsTable,
	tableNodeIndex:    nodeIndexTable,
	tableQueueCounts:  queueCountsTable,
	tableReservations: reservationsTable,
}}

// Store holds the tables.
type Store struct {
	db *memdb.MemDB
	// schema is the highest schema version of the entries applied and
	// the snapshot restored, OldestSchema at the least: once an entry of
	// a schema is in the log, every peer must read that schema, so the
	// leader writes no older one (Snapshot.Schema).
	schema atomic.Int64
	// feed is the jobs' changes for the scheduling loop (changes.go).
	feed changeFeed
}

// New returns an empty store.
func New() *Store {
	db, err := memdb.NewMemDB(schema)
	if err != nil {
		panic(fmt.Sprintf("state schema: %v", err)) // a bug, caught by every test
	}
	st := &Store{db: db}
	st.schema.Store(OldestSchema)
	return st
}

// raiseSchema records that an entry or snapshot of schema version v was
// applied (0, written before versions, reads as 1).
func (s *Store) raiseSchema(v int) {
	for {
		cur := s.schema.Load()
		if int64(v) <= cur || s.schema.CompareAndSwap(cur, int64(v)) {
			return
		}
	}
}

// Snapshot is a consistent read-only view. Its reads are in three rooms
// on one read transaction: the rows by their ids, the indexes and what
// derives from the whole state are its own; the jobs by node, user,
// state, array and queue counts are jobReads' (index.go, each.go,
// array.go); the tokens and servers are credentialReads' (tokens.go).
type Snapshot struct {
	jobReads
	credentialReads
	txn    *memdb.Txn
	schema int
}

// jobReads are a snapshot's reads of jobs by an index other than their
// id: by node, user, uid and state, as iterators, an array's elements,
// and the queue counts.
type jobReads struct{ txn *memdb.Txn }

// credentialReads are a snapshot's reads of the API's tokens and of the
// raft servers' API addresses.
type credentialReads struct{ txn *memdb.Txn }

// Snapshot opens a read view.
func (s *Store) Snapshot() *Snapshot {
	txn := s.db.Txn(false)
	return &Snapshot{jobReads: jobReads{txn}, credentialReads: credentialReads{txn}, txn: txn, schema: int(s.schema.Load())}
}

// Schema is the schema version the state is in: the highest of the
// entries it applied and the snapshot it restored, OldestSchema at the
// least. Its dumps carry it, and the leader never writes an older one.
func (v *Snapshot) Schema() int { return v.schema }

// Index is the raft index of the last change to any table, with a watch
// set that fires at the next change (memdb.WatchSet.WatchCtx).
func (v *Snapshot) Index() (uint64, memdb.WatchSet) {
	ws := memdb.NewWatchSet()
	var max uint64
	for _, t := range []string{tableJobs, tableNodes, tableSettings, tableReservations} {
		ch, raw, err := v.txn.FirstWatch(tableIndexes, "id", t)
		if err != nil {
			panic(err)
		}
		ws.Add(ch)
		if raw != nil && raw.(*indexEntry).Index > max {
			max = raw.(*indexEntry).Index
		}
	}
	return max, ws
}

// Jobs returns every job in id order.
func (v *Snapshot) Jobs() []*Job {
	it, err := v.txn.Get(tableJobs, "id")
	if err != nil {
		panic(err)
	}
	var out []*Job
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*Job))
	}
	return out
}

// Job returns one job, or nil.
func (v *Snapshot) Job(id uint64) *Job {
	raw, err := v.txn.First(tableJobs, "id", id)
	if err != nil {
		panic(err)
	}
	if raw == nil {
		return nil
	}
	return raw.(*Job)
}

// Nodes returns every node in name order.
func (v *Snapshot) Nodes() []*Node {
	it, err := v.txn.Get(tableNodes, "id")
	if err != nil {
		panic(err)
	}
	var out []*Node
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*Node))
	}
	return out
}

// Node returns one node, or nil.
func (v *Snapshot) Node(name string) *Node {
	raw, err := v.txn.First(tableNodes, "id", name)
	if err != nil {
		panic(err)
	}
	if raw == nil {
		return nil
	}
	return raw.(*Node)
}

// LastJobID is the highest job id ever given (0 when none).
func (v *Snapshot) LastJobID() uint64 {
	last, err := lastJobID(v.txn)
	if err != nil {
		panic(err)
	}
	return last
}

// Allocated sums what live containers hold on each node: every container
// placed on a node and not ended, of a job not ended. It is derived, never
// stored, so it cannot drift.
func (v *Snapshot) Allocated() map[string]Resources {
	out := map[string]Resources{}
	for _, j := range v.LiveJobs() {
		if j.State.Terminal() {
			continue
		}
		for _, c := range j.Containers {
			if c.Node == "" || c.State.Ended() {
				continue
			}
			r := out[c.Node]
			cr := c.Res()
			r.CPUMilli += cr.CPUMilli
			r.Memory += cr.Memory
			r.GPU += cr.GPU
			out[c.Node] = r
		}
	}
	return out
}

// DeviceUse is, per node, the GPU devices the live containers hold shares
// of: device index → its shares summed and the jobs holding them.
func (v *Snapshot) DeviceUse() map[string]map[int]*DeviceUse {
	out := map[string]map[int]*DeviceUse{}
	for _, j := range v.LiveJobs() { // in id order
		if j.State.Terminal() {
			continue
		}
		for _, c := range j.Containers {
			if c.Node == "" || c.State.Ended() {
				continue
			}
			for _, g := range c.GPUs {
				devs := out[c.Node]
				if devs == nil {
					devs = map[int]*DeviceUse{}
					out[c.Node] = devs
				}
				d := devs[g.Device]
				if d == nil {
					d = &DeviceUse{Device: g.Device}
					devs[g.Device] = d
				}
				d.Allocated += g.Share
				if n := len(d.Jobs); n == 0 || d.Jobs[n-1] != j.ID {
					d.Jobs = append(d.Jobs, j.ID)
				}
			}
		}
	}
	return out
}

// Dump is the whole state, for raft snapshots. Version is the schema it
// is in (Snapshot.Schema): a peer of the previous release reads the
// dumps of a cluster whose entries it reads.
type Dump struct {
	Version  int           `json:"version,omitempty"`
	Jobs     []*Job        `json:"jobs"`
	Nodes    []*Node       `json:"nodes"`
	Indexes  []*indexEntry `json:"indexes"`
	Settings *settings     `json:"settings,omitempty"`
	Usage    []*Usage      `json:"usage,omitempty"`
	Tokens   []*Token      `json:"tokens,omitempty"`
	Servers  []*Server     `json:"servers,omitempty"`
	Requests []*request    `json:"requests,omitempty"` // answers kept by request id (requests.go)
	// Reservations are the reservations (reservation.go), schema 11 on.
	Reservations []*Reservation `json:"reservations,omitempty"`
	// shared: the jobs' text is shared already (share; ReadDump's).
	shared bool
}

// Dump copies out the state as of v.
func (v *Snapshot) Dump() Dump {
	s := getSettings(v.txn)
	d := Dump{Version: v.schema, Jobs: v.Jobs(), Nodes: v.Nodes(), Settings: &s, Usage: v.Usage(), Tokens: v.Tokens(), Servers: v.Servers(), Requests: v.requests(), Reservations: v.Reservations()}
	it, err := v.txn.Get(tableIndexes, "id")
	if err != nil {
		panic(err)
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		d.Indexes = append(d.Indexes, raw.(*indexEntry))
	}
	return d
}

// Restore replaces the whole state with d in one transaction, so that
// blocking queries wake up rather than hang on a dropped database.
func (s *Store) Restore(d Dump) error {
	if err := CheckSchema(d.Version); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	if err := clearTables(txn); err != nil {
		return err
	}
	for _, j := range d.Jobs {
		if !d.shared {
			share(j)
		}
		if err := txn.Insert(tableJobs, j); err != nil {
			return err
		}
	}
	return s.finishRestore(txn, d)
}

// clearTables empties every table in txn.
func clearTables(txn *memdb.Txn) error {
	for _, t := range []string{tableJobs, tableNodes, tableIndexes, tableSettings, tableUsage, tableTokens, tableServers, tableRequests, tableNodeIndex, tableQueueCounts, tableReservations} {
		if _, err := txn.DeleteAll(t, "id"); err != nil {
			return err
		}
	}
	return nil
}

// finishRestore stores the rest of d in txn, whose jobs d's are already,
// and commits.
func (s *Store) finishRestore(txn *memdb.Txn, d Dump) error {
	for _, n := range d.Nodes {
		if err := txn.Insert(tableNodes, n); err != nil {
			return err
		}
	}
	var last uint64
	for _, e := range d.Indexes {
		if err := txn.Insert(tableIndexes, e); err != nil {
			return err
		}
		last = max(last, e.Index)
	}
	if err := rebuildNodeIndex(txn, d, last); err != nil {
		return err
	}
	if err := rebuildQueueCounts(txn, d); err != nil {
		return err
	}
	if s := d.Settings; s != nil {
		if s.Config != nil {
			if err := s.Config.Prepare(); err != nil {
				return fmt.Errorf("snapshot's partitions config: %w", err)
			}
		}
		s.ID = settingsID
		if err := txn.Insert(tableSettings, s); err != nil {
			return err
		}
	}
	for _, u := range d.Usage {
		if err := txn.Insert(tableUsage, u); err != nil {
			return err
		}
	}
	for _, t := range d.Tokens {
		if err := txn.Insert(tableTokens, t); err != nil {
			return err
		}
	}
	for _, sv := range d.Servers {
		if err := txn.Insert(tableServers, sv); err != nil {
			return err
		}
	}
	for _, r := range d.Requests {
		if err := txn.Insert(tableRequests, r); err != nil {
			return err
		}
	}
	for _, r := range d.Reservations {
		if err := txn.Insert(tableReservations, r); err != nil {
			return err
		}
	}
	s.commitRestore(txn)
	// The state is now in the snapshot's schema, which may be older than
	// what was applied before it (a restored backup).
	s.schema.Store(int64(max(OldestSchema, d.Version)))
	return nil
}

// tableIndex is the raft index of table's last change (0: never).
func (v *Snapshot) tableIndex(table string) uint64 {
	raw, err := v.txn.First(tableIndexes, "id", table)
	if err != nil {
		panic(err)
	}
	if raw == nil {
		return 0
	}
	return raw.(*indexEntry).Index
}

// NodesIndex is the raft index of the last change to any node, and
// ConfigIndex that of the settings (partitions config, charge time):
// what caches of node-derived views key on.
func (v *Snapshot) NodesIndex() uint64  { return v.tableIndex(tableNodes) }
func (v *Snapshot) ConfigIndex() uint64 { return v.tableIndex(tableSettings) }
