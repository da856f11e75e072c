package e2e

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestDevFakeGPUsShares (issue 14 items 6h, 6i): schedd --dev
// --fake-gpus 2 gives its nodelet two fake GPUs; two jobs of gpu = 0.6
// take one device each, and a third waits though 0.8 GPUs are free in
// all: bhosts -l shows each device's 0.4 free share and the job on it.
func TestDevFakeGPUsShares(t *testing.T) {
	needRunc(t)
	c := startCluster(t, 1, "4", "--fake-gpus", "2")
	job := `job "g" {
  resources {
    cpu    = 0.5
    memory = "64MiB"
    gpu    = 0.6
  }
  image   = "host"
  command = ["sleep", "60"]
}
`
	var ids []uint64
	for i := range 3 {
		id, _ := c.submit(c.dir, fmt.Sprint("g", i), job)
		ids = append(ids, id)
	}
	for _, id := range ids[:2] {
		c.waitState(id, 60*time.Second, func(j api.Job) bool { return j.State == api.JobRunning })
	}
	c.waitState(ids[2], 30*time.Second, func(j api.Job) bool { return j.State == api.JobPending && j.Reason == api.ReasonResources })
	out, errOut, code := c.run(c.dir, "bhosts", "-l")
	if code != 0 {
		t.Fatalf("bhosts -l: exit %d: %s", code, errOut)
	}
	for i, id := range ids[:2] {
		// The two devices, 0.6 held and 0.4 free each, one job on each.
		line := regexp.MustCompile(fmt.Sprintf(`(?m)^  [01]\s+0\.6\s+0\.4\s+%d$`, id))
		if !line.MatchString(out) {
			t.Errorf("bhosts -l lacks job %d (#%d) on a device with 0.4 free:\n%s", id, i+1, out)
		}
	}
	if !regexp.MustCompile(`GPU:\s+1\.2 of 2 allocated`).MatchString(out) {
		t.Errorf("bhosts -l: want 1.2 of 2 GPUs allocated:\n%s", out)
	}
}
