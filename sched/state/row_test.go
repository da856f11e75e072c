package state

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// leaderOnly are the view's fields the leader computes for an answer
// (api.Job): never a row's.
var leaderOnly = []string{"estimated_start", "priority", "priority_factors", "queue_position", "queue_length"}

// jsonNames are the JSON names of t's fields, embedded structs flattened.
func jsonNames(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			for n := range jsonNames(f.Type) {
				out[n] = true
			}
			continue
		}
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}

// A job row holds what is replicated and nothing the leader computes for
// an answer; every one of its JSON names is the view's, but for what the
// row holds resolved: what the job's text costs (schedd's own count) and
// a container's memory and GPU (the view shows them, with its cores, as
// the job file's "resources").
func TestJobRowHasNoLeaderOnlyFields(t *testing.T) {
	row, view := jsonNames(reflect.TypeFor[Job]()), jsonNames(reflect.TypeFor[api.Job]())
	for _, name := range leaderOnly {
		if row[name] {
			t.Errorf("state.Job has %q, a leader-only field of the view", name)
		}
		if !view[name] {
			t.Errorf("api.Job lacks %q", name)
		}
	}
	for name := range row {
		if !view[name] && name != "input_bytes" {
			t.Errorf("state.Job's %q is not api.Job's: a client would not see it", name)
		}
	}
	crow, cview := jsonNames(reflect.TypeFor[Container]()), jsonNames(reflect.TypeFor[api.Container]())
	for name := range crow {
		if !cview[name] && name != "memory" && name != "gpu" {
			t.Errorf("state.Container's %q is not api.Container's", name)
		}
	}
}

// A submit entry and a snapshot as schema 4 wrote them (the job the whole
// view, its containers without millicores, the node with its derived
// "allocated") still load: the millicores are derived once from the job
// file's cpu, and "allocated" is ignored (sched's TestSchema4SnapshotFile
// reads one through the strict decoder of snapshot files).
func TestSchema4RowsLoad(t *testing.T) {
	const container = `{"host":"main1","role":"main","idx":1,"rank":0,"image":"alpine","resources":{"cpu":1.5,"memory":1073741824},` +
		`"kernel_id":"k1","state":"pending","exit_code":0}`
	const job = `{"id":0,"session_id":"k1","name":"old","user":"ada","uid":1000,"gid":1000,"cwd":"/home/ada","partition":"default",` +
		`"spec":{"name":"old"},"state":"PENDING","exit_code":0,"containers":[` + container + `],"submitted":"0001-01-01T00:00:00Z","modify_index":0}`
	entry := `{"v":4,"kind":"submit","time":"2026-01-02T03:04:05Z","submit":` + job + `}`
	var c Command
	if err := json.Unmarshal([]byte(entry), &c); err != nil {
		t.Fatalf("a schema 4 submit entry does not decode: %v", err)
	}
	if err := CheckSchema(c.Version); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	id := h.apply(c).([]uint64)[0]
	if got := h.job(id).Containers[0].CPUMilli; got != 1500 {
		t.Fatalf("a schema 4 submit's container holds %d millicores, want 1500 (from cpu 1.5)", got)
	}
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: id, Nodes: []string{"n1"}}}}}})
	if got := h.st.Snapshot().Allocated()["n1"]; got.CPUMilli != 1500 || got.Memory != 1<<30 {
		t.Fatalf("n1 allocated %+v, want 1500 millicores and 1 GiB", got)
	}

	node := `{"name":"n1","addr":"10.0.0.1","state":"UP","runtime":"runc","capacity":{"cpu_milli":4000,"memory":8589934592},` +
		`"allocated":{"cpu_milli":0,"memory":0},"last_heartbeat":"2026-01-02T03:04:05Z","registered":"2026-01-02T03:04:05Z"}`
	dump := `{"version":4,"jobs":[` + strings.Replace(job, `"id":0`, `"id":7`, 1) + `],"nodes":[` + node + `],"indexes":[{"table":"jobs","index":3}]}`
	var d Dump
	if err := json.Unmarshal([]byte(dump), &d); err != nil { // as the raft FSM reads its snapshots
		t.Fatalf("a schema 4 snapshot does not decode: %v", err)
	}
	st := New()
	if err := st.Restore(d); err != nil {
		t.Fatal(err)
	}
	v := st.Snapshot()
	if j := v.Job(7); j == nil || j.Containers[0].CPUMilli != 1500 {
		t.Fatalf("restored job 7 = %+v, want its container at 1500 millicores", j)
	}
	if n := v.Node("n1"); n == nil || n.Capacity.CPUMilli != 4000 {
		t.Fatalf("restored node n1 = %+v", n)
	}
}

// What this schedd writes is what it reads back: the container's
// millicores are stored (set at admission), and a node row carries no
// derived field.
func TestRowsRoundTrip(t *testing.T) {
	h := newHarness(t)
	j := session(2)
	j.Containers[1].CPUMilli = 250
	id := h.apply(Command{Act: Submit{Jobs: []*Job{j}}}).([]uint64)[0]
	b, err := json.Marshal(Command{Version: SchemaVersion, Time: time.Now(), Act: Submit{Jobs: []*Job{h.job(id)}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"cpu_milli":250`) {
		t.Fatalf("the entry does not carry the container's millicores: %s", b)
	}
	var keys map[string]json.RawMessage
	nb, _ := json.Marshal(h.st.Snapshot().Node("n1"))
	if err := json.Unmarshal(nb, &keys); err != nil {
		t.Fatal(err)
	}
	for _, derived := range []string{"allocated", "partitions", "gpus", "credential"} {
		if _, ok := keys[derived]; ok {
			t.Errorf("a node row carries the derived %q: %s", derived, nb)
		}
	}
	var back Node
	if err := json.Unmarshal(nb, &back); err != nil || !reflect.DeepEqual(&back, h.st.Snapshot().Node("n1")) {
		t.Fatalf("node row round trip: %v, %+v", err, back)
	}
}

// Once admitted, a container's CPU is its row's millicores: what the
// node's allocation counts is CPUMilli, not the job file's cpu read
// again (here they disagree on purpose).
func TestAllocationReadsRowMillicores(t *testing.T) {
	h := newHarness(t)
	j := session(1)
	j.Containers[0].CPUMilli = 300 // the job file says cpu 1
	id := h.apply(Command{Act: Submit{Jobs: []*Job{j}}}).([]uint64)[0]
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: id, Nodes: []string{"n1"}}}}}})
	if got := h.st.Snapshot().Allocated()["n1"].CPUMilli; got != 300 {
		t.Fatalf("n1 allocated %d millicores, want the row's 300", got)
	}
}
