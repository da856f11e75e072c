package sim

import (
	"reflect"
	"testing"
	"time"
)

// The report on a hand-checked trace (8 processors, EASY): job 1 (1 proc)
// runs 0–100; job 2 (8 procs) waits for it, reserved at 100; job 3 (2
// procs, 200 s) would overrun the reservation and starts after job 2, at
// 150; job 4 (1 proc, 5 s) backfills at once.
func TestReport(t *testing.T) {
	js := []Job{
		{ID: 1, User: "a", Submit: 0, Run: 100, Estimate: 100, Procs: 1},
		{ID: 2, User: "b", Submit: 1, Run: 50, Estimate: 50, Procs: 8},
		{ID: 3, User: "c", Submit: 2, Run: 200, Estimate: 200, Procs: 2},
		{ID: 4, User: "a", Submit: 3, Run: 5, Estimate: 5, Procs: 1},
	}
	pol, _, _ := Policy("easy")
	r, err := Run(js, Options{Procs: 8, Policy: pol}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	bsld := 0.0 // summed at run time, in sorted order, as the report does
	for _, b := range []float64{1, 1, 1.74, 2.98} {
		bsld += b
	}
	want := []Dist{
		{Class: ClassAll, Jobs: 4, Wait: Summary{Mean: 61.75, P50: 0, P90: 148, P99: 148, Max: 148},
			BSLD: Summary{Mean: bsld / 4, P50: 1, P90: 2.98, P99: 2.98, Max: 2.98}},
		{Class: ClassOne, Jobs: 2, Wait: Summary{}, BSLD: Summary{Mean: 1, P50: 1, P90: 1, P99: 1, Max: 1}},
		{Class: ClassQuarter, Jobs: 1, Wait: Summary{Mean: 148, P50: 148, P90: 148, P99: 148, Max: 148},
			BSLD: Summary{Mean: 1.74, P50: 1.74, P90: 1.74, P99: 1.74, Max: 1.74}},
		{Class: ClassWide, Jobs: 1, Wait: Summary{Mean: 99, P50: 99, P90: 99, P99: 99, Max: 99},
			BSLD: Summary{Mean: 2.98, P50: 2.98, P90: 2.98, P99: 2.98, Max: 2.98}},
	}
	if !reflect.DeepEqual(r.Classes, want) {
		t.Errorf("classes\n%+v\nwant\n%+v", r.Classes, want)
	}
	if r.MeanWait != 61.75 || r.MaxWait != 148 || r.WideMeanWait != 99 {
		t.Errorf("means: wait %g, max %g, wide %g", r.MeanWait, r.MaxWait, r.WideMeanWait)
	}
	users := []UserShare{
		{User: "a", Jobs: 2, Configured: 1.0 / 3, Received: 105.0 / 905, MeanWait: 0},
		{User: "b", Jobs: 1, Configured: 1.0 / 3, Received: 400.0 / 905, MeanWait: 99},
		{User: "c", Jobs: 1, Configured: 1.0 / 3, Received: 400.0 / 905, MeanWait: 148},
	}
	if !reflect.DeepEqual(r.Users, users) {
		t.Errorf("users\n%+v\nwant\n%+v", r.Users, users)
	}
}

// What fair share guarantees a light user: a heavy user queues 20
// whole-machine jobs at once, then a light user one. Under EASY (first
// come, first served) the light job waits for all 20. Under the default
// policy it waits only for the job running and the one reservation held
// when it came: the reservation is kept, but after it the light user,
// with no usage, has the highest fair-share factor and takes the next
// one, ahead of the heavy user's older jobs.
func TestFairShareLightUser(t *testing.T) {
	var js []Job
	for i := range 20 {
		js = append(js, Job{ID: uint64(i + 1), User: "heavy", Submit: 0, Run: 100, Estimate: 100, Procs: 10})
	}
	js = append(js, Job{ID: 21, User: "light", Submit: 1, Run: 100, Estimate: 100, Procs: 10})
	wait := func(policy string) float64 {
		pol, fair, _ := Policy(policy)
		r, err := Run(js, Options{Procs: 10, Policy: pol, FairShare: fair}, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range r.Users {
			if u.User == "light" {
				return u.MeanWait
			}
		}
		t.Fatal("no light user in the report")
		return 0
	}
	if w := wait("easy"); w != 1999 {
		t.Errorf("easy: light user waits %g s, want 1999 (behind all 20)", w)
	}
	if w := wait("default"); w != 199 {
		t.Errorf("default: light user waits %g s, want 199 (the running job and the kept reservation)", w)
	}
}
