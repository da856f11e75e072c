package state

import (
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"

	"github.com/troupe-hpc/troupe/internal/lifecycle"
)

// decoded is j as a replica's FSM gets it: through the raft entry's JSON,
// so that it shares nothing with any other row.
func decoded(t *testing.T, j *Job) *Job {
	t.Helper()
	b, err := json.Marshal(Command{Version: SchemaVersion, Act: Submit{Jobs: []*Job{j}}})
	if err != nil {
		t.Fatal(err)
	}
	var c Command
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c.Act.(Submit).Jobs[0]
}

// Rows decoded apart share one copy of the text they hold alike (the
// environment, the commands, the user), and a change to one row (a hold,
// a kill) leaves the other as it was.
func TestRowsShareText(t *testing.T) {
	h := newHarness(t)
	mk := func() *Job {
		j := session(2)
		j.User, j.Cwd = "ada", "/home/ada"
		j.Spec.Image, j.Spec.Command = "pytorch", []string{"python", "train.py"}
		j.Spec.Env = map[string]string{"EPOCHS": "10", "LR": "0.1"}
		for i := range j.Containers {
			j.Containers[i].Command = []string{"python", "train.py"}
		}
		return decoded(t, j)
	}
	a := h.apply(Command{Act: Submit{Jobs: []*Job{mk()}}}).([]uint64)[0]
	b := h.apply(Command{Act: Submit{Jobs: []*Job{mk()}}}).([]uint64)[0]
	ja, jb := h.job(a), h.job(b)
	if !sameMap(ja.Spec.Env, jb.Spec.Env) {
		t.Error("two jobs with the same environment hold two copies of it")
	}
	if unsafe.SliceData(ja.Spec.Command) != unsafe.SliceData(jb.Spec.Command) ||
		unsafe.SliceData(ja.Containers[0].Command) != unsafe.SliceData(jb.Containers[1].Command) {
		t.Error("jobs with the same command hold copies of it")
	}
	if unsafe.StringData(ja.User) != unsafe.StringData(jb.User) || unsafe.StringData(ja.Cwd) != unsafe.StringData(jb.Cwd) {
		t.Error("jobs of one user hold copies of its name and directory")
	}
	if unsafe.StringData(ja.Containers[0].KernelID) != unsafe.StringData(ja.SessionID) {
		t.Error("main1's kernel id is a copy of the session id")
	}
	before, err := json.Marshal(jb)
	if err != nil {
		t.Fatal(err)
	}
	h.apply(Command{Act: Hold{Job: JobRef{ID: a}}})
	h.apply(Command{Act: Kill{Job: JobRef{ID: a}}})
	if got := h.job(a).State; got != lifecycle.JobCancelled {
		t.Fatalf("job %d %s after its kill, want CANCELLED", a, got)
	}
	after, err := json.Marshal(h.job(b))
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Errorf("changing job %d changed job %d:\nbefore %s\nafter  %s", a, b, before, after)
	}
	// A different environment is its own.
	j := session(1)
	j.Spec.Env = map[string]string{"EPOCHS": "11", "LR": "0.1"}
	c := h.apply(Command{Act: Submit{Jobs: []*Job{decoded(t, j)}}}).([]uint64)[0]
	if got := h.job(c).Spec.Env; sameMap(got, ja.Spec.Env) || !reflect.DeepEqual(got, j.Spec.Env) {
		t.Errorf("job %d's environment %v, want its own %v", c, got, j.Spec.Env)
	}
}
