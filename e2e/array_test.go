package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestJobArray: a 3-element job array of real containers, at most 2
// running at once: every element runs as a session of its own, sees its
// index and its array's bounds in the environment and writes out.%I;
// bqueue folds the array into one line and --array lists its elements;
// the array ends COMPLETED, and bhist has each element's run with its
// index.
func TestJobArray(t *testing.T) {
	needRunc(t)
	c := startCluster(t, 1, "4")
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o777) // the job writes its files here as the user

	const job = `
job "sweep" {
  image   = "host"
  command = ["sh", "-c", "echo index=$TROUPE_ARRAY_INDEX lsf=$LSB_JOBINDEX slurm=$SLURM_ARRAY_TASK_ID end=$LSB_JOBINDEX_END count=$SLURM_ARRAY_TASK_COUNT array=$SLURM_ARRAY_JOB_ID lsbjobid=$LSB_JOBID; sleep 1"]
  output  = "out.%I"
  resources {
    cpu    = 1
    memory = "64MiB"
  }
  array {
    range       = "1-3"
    max_running = 2
  }
}`
	id, _ := c.submit(dir, "sweep", job)
	p := c.waitState(id, 2*time.Minute, func(j api.Job) bool { return j.State.Terminal() })
	if p.State != api.JobCompleted || p.Array == nil || p.Array.States[api.JobCompleted] != 3 {
		t.Fatalf("array %d ended %s: %+v", id, p.State, p.Array)
	}
	for idx := 1; idx <= 3; idx++ {
		b, err := os.ReadFile(filepath.Join(dir, "out."+strconv.Itoa(idx)))
		if err != nil {
			t.Fatalf("element %d's output: %v", idx, err)
		}
		want := fmt.Sprintf("index=%d lsf=%d slurm=%d end=3 count=3 array=%d lsbjobid=%d", idx, idx, idx, id, id)
		if got := strings.TrimSpace(string(b)); got != want {
			t.Errorf("element %d wrote %q, want %q", idx, got, want)
		}
	}

	// bqueue -a: one line for the array; --array: one per element.
	out, errOut, code := c.run(dir, "bqueue", "-a")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d[1-3]", id)) || !strings.Contains(out, "DONE 3") ||
		strings.Contains(out, fmt.Sprintf("%d[2]", id)) {
		t.Errorf("bqueue -a: exit %d %s\n%s", code, errOut, out)
	}
	out, errOut, code = c.run(dir, "bqueue", "-a", "--array", "-o", "json")
	var list []api.Job
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("bqueue -a --array -o json: exit %d %s\n%s", code, errOut, out)
	}
	elems := map[int]api.Job{}
	for _, j := range list {
		if j.ArrayID == id {
			elems[j.ArrayIndex] = j
		}
	}
	if len(elems) != 3 {
		t.Fatalf("bqueue --array lists %d elements of %d: %s", len(elems), id, out)
	}
	// At most two ran at once: the third started after one of the first
	// two ended.
	e1, e2, e3 := elems[1], elems[2], elems[3]
	if e3.Started.Before(e1.Ended) && e3.Started.Before(e2.Ended) {
		t.Errorf("element 3 started at %s, before elements 1 (%s) and 2 (%s) ended: max_running 2", e3.Started, e1.Ended, e2.Ended)
	}

	// bjobs of the array's id: its elements, each a job of that id, as
	// LSF's; they have ended and left for the accounting store.
	out, errOut, code = c.run(dir, "bjobs", "-noheader", "-o", "jobid stat name", strconv.FormatUint(id, 10))
	for idx := 1; idx <= 3; idx++ {
		if want := fmt.Sprintf("%d DONE sweep[%d]", id, idx); code != 0 || !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("bjobs %d lacks %q: exit %d %s\n%s", id, want, code, errOut, out)
		}
	}

	// bjob of one element; bhist of the array.
	out, errOut, code = c.run(dir, "bjob", fmt.Sprintf("%d[2]", id))
	if code != 0 || !strings.Contains(out, fmt.Sprintf("Job %d[2]: sweep", id)) || !strings.Contains(out, "COMPLETED") {
		t.Errorf("bjob %d[2]: exit %d %s\n%s", id, code, errOut, out)
	}
	out, errOut, code = c.run(dir, "bhist", strconv.FormatUint(id, 10))
	for idx := 1; idx <= 3; idx++ {
		if code != 0 || !strings.Contains(out, fmt.Sprintf("%d[%d]", id, idx)) {
			t.Errorf("bhist %d lacks element %d: exit %d %s\n%s", id, idx, code, errOut, out)
		}
	}
}
