package sched

import (
	"testing"

	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sched/partition"
)

// schedd without a partitions file schedules with exactly the policy bsim
// measures as "default" (core.DefaultPolicy), and the partition's
// starvation threshold reaches the core.
func TestDefaultConfigIsDefaultPolicy(t *testing.T) {
	cfg := partition.Default()
	if got, want := corePolicy(cfg), core.DefaultPolicy(); got != want {
		t.Errorf("corePolicy(partition.Default()) = %+v\nwant core.DefaultPolicy() = %+v", got, want)
	}
	if partition.DefaultStarvationThreshold != core.DefaultStarvationAge {
		t.Errorf("partition default threshold %v, core %v", partition.DefaultStarvationThreshold, core.DefaultStarvationAge)
	}
}
