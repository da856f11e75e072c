package state

import (
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestKillDone: bkill -d ends a killed job COMPLETED (LSF's DONE), pending
// or running, where a plain kill ends it CANCELLED.
func TestKillDone(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}}}}})

	if j := h.apply(Command{Act: Kill{Job: JobRef{ID: 2}, Done: true}}).(*Job); j.State != api.JobCompleted || !j.Cancelled || !j.KillDone {
		t.Fatalf("pending job killed with -d: %s, want COMPLETED at once", j.State)
	}
	h.report("n1", 1, "main1", api.ContainerRunning, 0)
	j := h.apply(Command{Act: Kill{Job: JobRef{ID: 1}, Done: true}}).(*Job)
	if j.State.Terminal() || !j.KillWanted {
		t.Fatalf("running job killed with -d: %s; want it to wait for its nodelet", j.State)
	}
	h.report("n1", 1, "main1", api.ContainerKilled, 137)
	if j := h.job(1); j.State != api.JobCompleted {
		t.Fatalf("state %s, want COMPLETED", j.State)
	}
}
