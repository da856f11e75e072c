package sim

import (
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/sched/core"
)

// Jobs that carry licenses run no more at once than the site's count,
// though processors would let them all run.
func TestLicenses(t *testing.T) {
	var js []Job
	for i := 1; i <= 12; i++ {
		js = append(js, Job{ID: uint64(i), User: "a", Submit: 0, Run: 100, Estimate: 100, Procs: 1,
			Licenses: map[string]int{"matlab": 1}})
	}
	r, err := Run(js, Options{Procs: 64, Policy: core.DefaultPolicy(), Licenses: map[string]int{"matlab": 3}}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	for at := int64(0); at < 400; at++ {
		n := 0
		for _, j := range js {
			if s, ok := r.Starts[j.ID]; ok && s <= at && at < s+j.Run {
				n++
			}
		}
		if n > 3 {
			t.Fatalf("at %ds %d jobs hold one of 3 seats", at, n)
		}
	}
	if len(r.Starts) != 12 || r.MaxWait != 300 {
		t.Errorf("%d started, max wait %gs; want 12, 300s (four rounds of three)", len(r.Starts), r.MaxWait)
	}
}
