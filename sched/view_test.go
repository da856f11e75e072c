package sched

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/state"
)

// fill sets every settable field of v to a non-zero value, recursively
// (one element per slice and map), so that a field a conversion forgets
// shows.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.5)
	}
}

// jsonMap is v's JSON encoding as a map, dropping the names in drop.
func jsonMap(t *testing.T, v any, drop ...string) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, d := range drop {
		delete(m, d)
	}
	return m
}

// jobView copies every field of a row (a field added to state.Job and
// api.Job but not to the conversion fails here), and the view reads on
// the wire as the row does but where the row holds resolved values: a
// container's memory and GPU are shown, with its cores, as its
// "resources" beside its millicores (which the assignment carries to
// the node, which enforces them); the job's spec shows the name,
// partition, account, reservation and walltime in force and main1's resources; what
// the job's text costs is schedd's own.
func TestJobViewCopiesEveryRowField(t *testing.T) {
	var row state.Job
	fill(reflect.ValueOf(&row).Elem())
	view := jobView(&row, jobExtras{})
	got := jsonMap(t, view)
	want := jsonMap(t, &row, "input_bytes")
	var res map[string]any
	for _, c := range want["containers"].([]any) {
		c := c.(map[string]any)
		res = map[string]any{"cpu": float64(row.Containers[0].CPUMilli) / 1000, "memory": c["memory"], "gpu": c["gpu"]}
		c["resources"] = res
		delete(c, "memory")
		delete(c, "gpu")
	}
	spec := want["spec"].(map[string]any)
	spec["name"], spec["partition"], spec["account"], spec["walltime"], spec["resources"] = want["name"], want["partition"], want["account"], want["walltime"], res
	spec["reservation"] = want["reservation"]
	spec["licenses"] = want["licenses"]
	if !reflect.DeepEqual(got, want) {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		t.Fatalf("the view differs from the row:\nview %s\nrow  %s", gb, wb)
	}

	var n state.Node
	fill(reflect.ValueOf(&n).Elem())
	if got, want := jsonMap(t, nodeView(&n), "allocated"), jsonMap(t, &n); !reflect.DeepEqual(got, want) {
		t.Fatalf("the node view differs from the row:\nview %v\nrow  %v", got, want)
	}
}

// The leader's last-pass data reaches the view, and only the view.
func TestJobViewCarriesLeaderExtras(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := rank{factors: api.PriorityFactors{Age: 1, FairShare: 2, Total: 3}, pos: 2, len: 5}
	row := &state.Job{ID: 9, State: api.JobPending}
	v := jobView(row, jobExtras{start: start, rank: &r})
	if !v.EstimatedStart.Equal(start) || v.Priority != 3 || v.PriorityFactors == nil || *v.PriorityFactors != r.factors ||
		v.QueuePosition != 2 || v.QueueLength != 5 {
		t.Fatalf("view %+v lacks the pass's estimate, priority or position", v)
	}
	m := jsonMap(t, v)
	for _, name := range []string{"estimated_start", "priority", "priority_factors", "queue_position", "queue_length"} {
		if _, ok := m[name]; !ok {
			t.Errorf("the view's JSON lacks %q", name)
		}
	}
	if m := jsonMap(t, row); m["priority"] != nil || m["queue_position"] != nil || m["estimated_start"] != nil {
		t.Fatalf("the row's JSON carries leader-only data: %v", m)
	}
	// A job the pass did not rank gets nothing.
	if v := jobView(row, jobExtras{}); v.PriorityFactors != nil || v.QueuePosition != 0 || !v.EstimatedStart.IsZero() {
		t.Fatalf("view without extras: %+v", v)
	}
}

// An assignment carries the row's values under the view's names, for
// every field a nodelet reads (a field added to api.AssignedJob but not
// to assignedJob fails here), and none of the leader-only ones.
func TestAssignedJobCopiesItsFields(t *testing.T) {
	var row state.Job
	fill(reflect.ValueOf(&row).Elem())
	got := jsonMap(t, assignedJob(&row))
	full := jsonMap(t, jobView(&row, jobExtras{}))
	for name, v := range got {
		if !reflect.DeepEqual(v, full[name]) {
			t.Errorf("assignment's %q = %v, the job's is %v", name, v, full[name])
		}
	}
	names, _ := jsonFields(reflect.TypeFor[api.AssignedJob]())
	for name := range names {
		if _, ok := got[name]; !ok {
			t.Errorf("assignment lacks %q (left zero by assignedJob)", name)
		}
	}
	for _, name := range []string{"estimated_start", "priority", "priority_factors", "queue_position", "queue_length"} {
		if _, ok := got[name]; ok {
			t.Errorf("assignment carries the leader-only %q", name)
		}
	}
}
