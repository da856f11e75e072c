package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/lifecycle"
)

// TestOlderSchemaEntries: in a cluster in the middle of a rolling
// upgrade the leader writes the previous release's schema, and every
// peer, old or new, must apply such an entry alike: its sender (By),
// which the previous release does not know, is ignored, so a request id
// reused by another user is refused as that release refuses it.
func TestOlderSchemaEntries(t *testing.T) {
	h := newHarness(t)
	a := h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}).([]uint64)[0]
	b := h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}).([]uint64)[0]
	h.apply(Command{Version: OldestSchema, Act: Hold{Job: JobRef{ID: a}, Request: Request{ID: "r", By: "alice"}}})
	h.idx++
	_, err := h.st.Apply(h.idx, Command{Version: OldestSchema, Time: t0, Act: Hold{Job: JobRef{ID: b}, Request: Request{ID: "r", By: "bob"}}})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("bob's hold with alice's request id in a schema %d entry: %v, want the conflict the previous release answers", OldestSchema, err)
	}
	if h.job(b).State != api.JobPending {
		t.Fatalf("job %d is %s, want PENDING", b, h.job(b).State)
	}
	// A schema 7 entry knows the sender.
	if theirs := h.apply(Command{Act: Hold{Job: JobRef{ID: b}, Request: Request{ID: "r", By: "bob"}}}).(*Job); theirs.ID != b {
		t.Fatalf("bob's hold answered job %d", theirs.ID)
	}
}

// TestSchemaInForce: the state is in the highest schema of what it
// applied (OldestSchema at the least), its dumps carry it, and a
// restore puts it in the dump's.
func TestSchemaInForce(t *testing.T) {
	st := New()
	if v := st.Snapshot().Schema(); v != OldestSchema {
		t.Fatalf("a new state is in schema %d, want %d", v, OldestSchema)
	}
	if _, err := st.Apply(1, Command{Version: OldestSchema, Act: Touch{}}); err != nil {
		t.Fatal(err)
	}
	old := st.Snapshot().Dump()
	if old.Version != OldestSchema {
		t.Fatalf("dump after a schema %d entry carries %d", OldestSchema, old.Version)
	}
	// Refused or not, an entry's schema is in the log.
	if _, err := st.Apply(2, Command{Version: SchemaVersion, Act: Kill{Job: JobRef{ID: 99}}}); err == nil {
		t.Fatal("kill of a job that does not exist applied")
	}
	if _, err := st.Apply(3, Command{Version: OldestSchema, Act: Touch{}}); err != nil {
		t.Fatal(err)
	}
	if v, d := st.Snapshot().Schema(), st.Snapshot().Dump().Version; v != SchemaVersion || d != SchemaVersion {
		t.Fatalf("after a schema %d entry: schema %d, dump %d", SchemaVersion, v, d)
	}
	if err := st.Restore(old); err != nil {
		t.Fatal(err)
	}
	if v := st.Snapshot().Schema(); v != OldestSchema {
		t.Fatalf("after restoring a schema %d dump: %d", OldestSchema, v)
	}
	if err := st.Restore(Dump{Version: 2}); err != nil {
		t.Fatal(err)
	}
	if v := st.Snapshot().Schema(); v != OldestSchema {
		t.Fatalf("after restoring a schema 2 dump: %d, want %d (never older than what this release writes)", v, OldestSchema)
	}
}

// TestOlderSchemaRuns: entries of a schema before every run was kept
// (nodeRuns) apply as the release that wrote them does, on every peer: a
// requeue keeps no run and carries the usage on, and a report starts and
// ends the job at the entry's time whatever the node says. The same
// entries at SchemaVersion keep the run and take the node's times.
func TestOlderSchemaRuns(t *testing.T) {
	for _, v := range []int{OldestSchema, 8, 9, SchemaVersion} {
		t.Run(fmt.Sprintf("schema %d", v), func(t *testing.T) {
			kept := nodeRuns(v)
			h := newHarness(t)
			j := session(1)
			j.Spec.Requeue = true
			h.apply(Command{Version: v, Act: Submit{Jobs: []*Job{j}}})
			h.apply(Command{Version: v, Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}}}}})
			placed := t0.Add(time.Duration(h.idx) * time.Second)
			h.apply(Command{Version: v, Act: Reports{Reports: []Report{Report{Node: "n1", Updates: []ContainerUpdate{
				{JobID: 1, Host: "main1", State: api.ContainerRunning, CPUTime: 5 * time.Second, At: placed.Add(time.Second / 2), Reach: "10.128.0.2"}}}}}})
			reported := t0.Add(time.Duration(h.idx) * time.Second)
			if reach := h.job(1).Containers[0].Reach; (reach != "") != kept {
				t.Fatalf("main1's routed address %q kept: %v, want %v (an older peer drops it)", reach, reach != "", kept)
			}
			if got, want := h.job(1).Started, reported; kept {
				want = placed.Add(time.Second / 2)
				if !got.Equal(want) {
					t.Fatalf("started %v, want the node's %v", got, want)
				}
			} else if !got.Equal(want) {
				t.Fatalf("started %v, want the entry's time %v (the node's time ignored)", got, want)
			}
			h.apply(Command{Version: v, Act: NodesDown{Down: &NodeDown{Nodes: []string{"n1"}}}})
			r := h.job(1)
			if r.State != api.JobPending || r.Requeues != 1 {
				t.Fatalf("after the node failure: %s, run %d; want PENDING, run 1", r.State, r.Requeues)
			}
			if kept {
				if len(r.Runs) != 1 || r.Runs[0].CPUTime != 5*time.Second || r.CPUTime != 0 || r.Containers[0].CPUTime != 0 {
					t.Fatalf("runs %+v, usage %v (main1 %v); want run 0 kept with 5s, run 1 at none", r.Runs, r.CPUTime, r.Containers[0].CPUTime)
				}
			} else if len(r.Runs) != 0 || r.CPUTime != 5*time.Second || r.Containers[0].CPUTime != 5*time.Second {
				t.Fatalf("runs %+v, usage %v (main1 %v); want no run kept and the usage carried on, as before", r.Runs, r.CPUTime, r.Containers[0].CPUTime)
			}

			// The next run ends on the node 2 s after it started; the
			// report comes later.
			h.apply(Command{Version: v, Act: NodeUp{Node: "n1"}})
			h.apply(Command{Version: v, Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}}}}})
			h.apply(Command{Version: v, Act: Reports{Reports: []Report{Report{Node: "n1", Updates: []ContainerUpdate{
				{JobID: 1, Host: "main1", Requeues: 1, State: api.ContainerRunning}}}}}})
			started := h.job(1).Started
			for range 5 {
				h.apply(Command{Version: v, Act: NodeUp{Node: "n1"}})
			}
			h.apply(Command{Version: v, Act: Reports{Reports: []Report{Report{Node: "n1", Updates: []ContainerUpdate{
				{JobID: 1, Host: "main1", Requeues: 1, State: api.ContainerExited, At: started.Add(2 * time.Second)}}}}}})
			now := t0.Add(time.Duration(h.idx) * time.Second)
			e := h.job(1)
			want := now
			if kept {
				want = started.Add(2 * time.Second)
			}
			if e.State != api.JobCompleted || !e.Ended.Equal(want) {
				t.Fatalf("job %s ended %v; want COMPLETED at %v", e.State, e.Ended, want)
			}
			if ended := e.Containers[0].Ended; kept != !ended.IsZero() {
				t.Fatalf("main1's end %v kept: %v, want %v", ended, !ended.IsZero(), kept)
			}
		})
	}
}

// TestRunsAcrossTheSchemaChange: a job requeued by an entry of an older
// schema (no run kept) and again by a schema 9 entry keeps no run: Runs[i]
// is run i, and the run 9 saw is run 1, not run 0.
func TestRunsAcrossTheSchemaChange(t *testing.T) {
	h := newHarness(t)
	j := session(1)
	j.Spec.Requeue = true
	h.apply(Command{Act: Submit{Jobs: []*Job{j}}})
	for _, v := range []int{8, 9} {
		h.apply(Command{Version: v, Act: NodeUp{Node: "n1"}})
		h.apply(Command{Version: v, Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}}}}})
		h.apply(Command{Version: v, Act: NodesDown{Down: &NodeDown{Nodes: []string{"n1"}}}})
	}
	if r := h.job(1); r.Requeues != 2 || len(r.Runs) != 0 {
		t.Fatalf("after a schema %d and a schema %d requeue: run %d, runs kept %+v; want run 2, none kept (run 0's is unknown)",
			8, 9, r.Requeues, r.Runs)
	}
}

// TestRowsOfEverySchemaLoad: a submit entry and a snapshot of every
// schema before rows were resolved (1 to 10: the job row carrying its
// whole job file, its containers their job file's resources in cores,
// with millicores from 5 on) decode into resolved rows: the walltime in
// force is the row's (else, in a row that had none, the file's); a
// container's memory and GPU are its file's, its millicores its own,
// else its cores rounded; what the session asks (environment, requeue,
// mode) is kept.
func TestRowsOfEverySchemaLoad(t *testing.T) {
	for v := 1; v < rowSchema; v++ {
		t.Run(fmt.Sprintf("schema %d", v), func(t *testing.T) {
			milli := ""
			if v >= 5 {
				milli = `"cpu_milli":1500,`
			}
			wall := `"walltime":7200000000000,`
			specWall := `"walltime":3600000000000,`
			if v < 3 { // a row that carries only the file's walltime
				wall, specWall = "", `"walltime":7200000000000,`
			}
			container := `{"host":"main1","role":"main","idx":1,"rank":0,"image":"alpine","command":["sh","-c","true"],` +
				`"resources":{"cpu":1.5,"memory":1073741824,"gpu":0.5},` + milli + `"kernel_id":"k1","state":"pending","exit_code":0}`
			job := `{"id":0,"session_id":"k1","name":"old","user":"ada","uid":1000,"gid":1000,"cwd":"/home/ada","partition":"default",` + wall +
				`"spec":{"name":"old",` + specWall + `"requeue":true,"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1.5,"memory":1073741824,"gpu":0.5},` +
				`"image":"alpine","command":["sh","-c","true"],"env":{"A":"b"}},"state":"PENDING","exit_code":0,"containers":[` + container + `],` +
				`"submitted":"0001-01-01T00:00:00Z","modify_index":0}`
			check := func(from string, j *Job) {
				t.Helper()
				c := j.Containers[0]
				if j.Walltime != 2*time.Hour || c.CPUMilli != 1500 || c.Memory != 1<<30 || c.GPU != 0.5 ||
					!j.Spec.Requeue || j.Spec.Env["A"] != "b" || j.Spec.Cluster.Mode != "single-node" || len(c.Command) != 3 || j.InputBytes == 0 {
					t.Fatalf("%s: row %+v, container %+v; want walltime 2h, 1500 millicores, 1 GiB, gpu 0.5, the session's settings", from, j, c)
				}
			}
			var c Command
			if err := json.Unmarshal([]byte(fmt.Sprintf(`{"v":%d,"kind":"submit","time":"2026-01-02T03:04:05Z","submit":%s}`, v, job)), &c); err != nil {
				t.Fatalf("a schema %d submit entry does not decode: %v", v, err)
			}
			check("entry", c.Act.(Submit).Jobs[0])
			h := newHarness(t)
			id := h.apply(c).([]uint64)[0]
			check("applied", h.job(id))
			snap := fmt.Sprintf(`{"version":%d,"jobs":[%s],"nodes":[],"indexes":[{"table":"jobs","index":3}]}`, v, job)
			var d Dump
			if err := json.Unmarshal([]byte(snap), &d); err != nil {
				t.Fatalf("a schema %d snapshot does not decode: %v", v, err)
			}
			st := New()
			if err := st.Restore(d); err != nil {
				t.Fatal(err)
			}
			check("restored", st.Snapshot().Jobs()[0])
			d, err := ReadDump(strings.NewReader(snap)) // as raft's snapshots are read
			if err != nil {
				t.Fatalf("a schema %d snapshot does not read a job at a time: %v", v, err)
			}
			st = New()
			if err := st.Restore(d); err != nil {
				t.Fatal(err)
			}
			check("restored a job at a time", st.Snapshot().Jobs()[0])
		})
	}
}

// TestRowsInAnOlderSchema: while the cluster's schema is older (a
// rolling upgrade), a submit entry and a snapshot are written in its
// form, which the previous release reads as its own (the job file's
// walltime, name, partition and resources; each container's resources
// in cores, no resolved memory), and this schedd reads back the same
// rows; in the current schema they carry the resolved rows alone.
func TestRowsInAnOlderSchema(t *testing.T) {
	j := session(2)
	j.ID, j.Name, j.Partition, j.Walltime = 1, "j", "default", time.Hour
	j.Containers[1].CPUMilli, j.Containers[1].GPU = 250, 1
	j.InputBytes = 42
	for _, v := range []int{OldestSchema, rowSchema - 1, SchemaVersion} {
		for what, enc := range map[string]func() ([]byte, error){
			"entry": func() ([]byte, error) { return json.Marshal(Command{Version: v, Act: Submit{Jobs: []*Job{j}}}) },
			"dump":  func() ([]byte, error) { return json.Marshal(Dump{Version: v, Jobs: []*Job{j}}) },
		} {
			b, err := enc()
			if err != nil {
				t.Fatal(err)
			}
			var raw struct {
				Submit *json.RawMessage   `json:"submit"`
				Jobs   []*json.RawMessage `json:"jobs"`
				Act    struct {
					Jobs []*json.RawMessage `json:"jobs"`
				} `json:"act"`
			}
			if err := json.Unmarshal(b, &raw); err != nil {
				t.Fatal(err)
			}
			row := raw.Submit
			if row == nil && len(raw.Jobs) > 0 {
				row = raw.Jobs[0]
			}
			if row == nil {
				row = raw.Act.Jobs[0]
			}
			var old struct {
				Spec struct {
					Name      string        `json:"name"`
					Walltime  time.Duration `json:"walltime"`
					Resources *struct{ CPU float64 }
				} `json:"spec"`
				InputBytes *int `json:"input_bytes"`
				Containers []map[string]json.RawMessage
			}
			if err := json.Unmarshal(*row, &old); err != nil {
				t.Fatal(err)
			}
			_, resolved := old.Containers[1]["memory"]
			legacy := old.Spec.Name == "j" && old.Spec.Walltime == time.Hour && old.Spec.Resources != nil && old.Spec.Resources.CPU == 1 &&
				old.InputBytes == nil && !resolved && string(old.Containers[1]["resources"]) == `{"cpu":0.25,"memory":1073741824,"gpu":1}`
			if want := v < rowSchema; legacy != want {
				t.Errorf("schema %d %s: in the previous release's form: %v, want %v: %s", v, what, legacy, want, *row)
			}
			var back Job
			if err := json.Unmarshal(*row, &back); err != nil {
				t.Fatal(err)
			}
			if v < rowSchema {
				back.InputBytes = j.InputBytes // not in the form: measured again
			}
			if !reflect.DeepEqual(&back, j) {
				t.Errorf("schema %d %s reads back as %+v, want %+v", v, what, back, *j)
			}
		}
	}
}

// everyAct is one act of each kind, as the leader proposes them.
func everyAct() []Act {
	idx := 5
	j := session(1)
	j.ID = 1
	j.InputBytes = rowInput(j) // what an older schema's row reads back with
	return []Act{
		Submit{Jobs: []*Job{j}},
		Submit{Jobs: []*Job{j, j}},
		Submit{Jobs: []*Job{j}, Each: true},
		Register{Node: &Node{Name: "n1", State: lifecycle.NodeUp, Capacity: Resources{CPUMilli: 4000}}},
		Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}}}},
		Reports{Reports: []Report{{Node: "n1", Updates: []ContainerUpdate{{JobID: 1, Host: "main1", State: lifecycle.ContainerRunning}}}}},
		Reports{Reports: []Report{{Node: "n1"}, {Node: "n2"}}},
		Kill{Job: JobRef{ID: 1}, Done: true, Request: Request{ID: "r", By: "ada"}},
		Kill{Job: JobRef{ID: 3, Index: &idx}},
		Hold{Job: JobRef{ID: 1}, Request: Request{ID: "h"}},
		Release{Job: JobRef{ID: 1, Index: &idx}},
		Configure{Config: configWith(time.Hour)},
		Charge{},
		Timeout{Jobs: []uint64{1, 2}},
		NodesDown{Down: &NodeDown{Nodes: []string{"n1"}, Requeue: []string{"default"}}},
		NodeUp{Node: "n1"},
		PutToken{Token: &Token{ID: "t", Hash: "h", UID: 1, User: "ada"}},
		Revoke{ID: "t"},
		PutServer{Server: &Server{ID: "s1", API: "http://a"}},
		DrainNodes{Drain: &Drain{Nodes: []string{"n1"}, Reason: "fix"}},
		SignalJob{Signal: &Signal{JobID: 1, Signal: 10}, Request: Request{ID: "s", By: "ada"}},
		Purge{Keys: []PurgeKey{{JobID: 1}}},
		MailSent{Mailed: &Mailed{JobID: 1, Event: MailBegin(0)}},
		Touch{},
	}
}

// TestCommandsOfEverySchema: every act reads back as itself from an
// entry of the current schema (a kind and its payload), and from one of
// every older schema the leader may write while a peer of the previous
// release is in the cluster (the union of fields those schemas read;
// acts that were several kinds are written as the one that fits).
func TestCommandsOfEverySchema(t *testing.T) {
	at := t0.Round(0)
	for _, v := range []int{OldestSchema, 8, rowSchema - 1, SchemaVersion} {
		for _, a := range everyAct() {
			b, err := json.Marshal(Command{Version: v, Time: at, Act: a})
			if err != nil {
				t.Fatalf("schema %d %s: %v", v, a.Kind(), err)
			}
			var kind struct {
				Kind string          `json:"kind"`
				Act  json.RawMessage `json:"act"`
			}
			if err := json.Unmarshal(b, &kind); err != nil {
				t.Fatal(err)
			}
			if typed := kind.Act != nil; typed != (v >= commandSchema) {
				t.Errorf("schema %d %s: written with a typed payload: %v: %s", v, a.Kind(), typed, b)
			}
			var back Command
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("schema %d %s: %v: %s", v, a.Kind(), err, b)
			}
			got, _ := json.Marshal(back.Act)
			want, _ := json.Marshal(a)
			if back.Version != v || !back.Time.Equal(at) || reflect.TypeOf(back.Act) != reflect.TypeOf(a) || string(got) != string(want) {
				t.Errorf("schema %d %s reads back as %#v, want %#v (%s)", v, a.Kind(), back.Act, a, b)
			}
		}
	}
}

// TestOlderKindsAreOneAct: the kinds schemas before 11 had for one act
// each read as that act: a batch and a group of single submits as
// Submit, a single report as Reports; a kill, hold or release names its
// job, element and request; an unknown kind is refused by name.
func TestOlderKindsAreOneAct(t *testing.T) {
	for _, c := range []struct {
		entry string
		want  Act
	}{
		{`{"v":4,"kind":"submit-batch","time":"2026-01-02T03:04:05Z","batch":[{"id":0,"name":"a"},{"id":0,"name":"b"}]}`,
			Submit{Jobs: []*Job{{Name: "a"}, {Name: "b"}}}},
		{`{"v":6,"kind":"submits","time":"2026-01-02T03:04:05Z","submits":[{"id":0,"name":"a"}]}`,
			Submit{Jobs: []*Job{{Name: "a"}}, Each: true}},
		{`{"v":2,"kind":"report","time":"2026-01-02T03:04:05Z","report":{"node":"n1","updates":[]}}`,
			Reports{Reports: []Report{{Node: "n1", Updates: []ContainerUpdate{}}}}},
		{`{"v":7,"kind":"kill","time":"2026-01-02T03:04:05Z","kill":12,"index":5,"kill_done":true,"request":"r","by":"ada"}`,
			Kill{Job: JobRef{ID: 12, Index: func() *int { i := 5; return &i }()}, Done: true, Request: Request{ID: "r", By: "ada"}}},
		{`{"kind":"hold","time":"2026-01-02T03:04:05Z","hold":3}`, Hold{Job: JobRef{ID: 3}}},
	} {
		var got Command
		if err := json.Unmarshal([]byte(c.entry), &got); err != nil {
			t.Fatalf("%s: %v", c.entry, err)
		}
		for _, j := range jobsOf(got.Act) {
			j.Containers, j.InputBytes = nil, 0
		}
		if !reflect.DeepEqual(got.Act, c.want) {
			t.Errorf("%s reads as %#v, want %#v", c.entry, got.Act, c.want)
		}
	}
	for _, e := range []string{`{"v":9,"kind":"frobnicate","time":"2026-01-02T03:04:05Z"}`, `{"v":11,"kind":"frobnicate","time":"2026-01-02T03:04:05Z","act":{}}`} {
		var got Command
		if err := json.Unmarshal([]byte(e), &got); !errors.Is(err, ErrUnknownKind) || !strings.Contains(err.Error(), "frobnicate") {
			t.Errorf("%s: %v, want the unknown kind refused by name", e, err)
		}
	}
}

func jobsOf(a Act) []*Job {
	if s, ok := a.(Submit); ok {
		return s.Jobs
	}
	return nil
}
