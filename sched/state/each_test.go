package state

import (
	"slices"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestEachAgreesWithLists: the iterators yield what the lists hold, in
// id order, merged across users and states; and one stopped early reads
// no further.
func TestEachAgreesWithLists(t *testing.T) {
	h := newHarness(t)
	for i, u := range []string{"alice", "bob", "alice", "carol", "bob", "alice"} {
		j := session(1)
		j.User, j.UID = u, 1000+i
		if i%2 == 1 {
			j.State = api.JobHeld
		}
		h.apply(Command{Act: Submit{Jobs: []*Job{j}}})
	}
	h.apply(Command{Act: Kill{Job: JobRef{ID: 3}}})
	v := h.st.Snapshot()
	collect := func(seq func(func(*Job) bool)) []uint64 {
		var out []uint64
		for j := range seq {
			out = append(out, j.ID)
		}
		return out
	}
	if got, want := collect(v.EachJob()), ids(v.Jobs()); !slices.Equal(got, want) {
		t.Errorf("EachJob %v, Jobs %v", got, want)
	}
	if got, want := collect(v.EachJobOf("alice", "bob")), ids(append(v.JobsOf("alice"), v.JobsOf("bob")...)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("EachJobOf(alice, bob) %v, JobsOf %v", got, want)
	}
	if got, want := collect(v.EachJobIn(api.JobHeld, api.JobCancelled, api.JobPending)), ids(v.JobsIn(api.JobHeld, api.JobCancelled, api.JobPending)); !slices.Equal(got, want) || len(got) != 6 {
		t.Errorf("EachJobIn %v, JobsIn %v", got, want)
	}
	if got, want := collect(v.EachLiveJob()), ids(v.LiveJobs()); !slices.Equal(got, want) {
		t.Errorf("EachLiveJob %v, LiveJobs %v", got, want)
	}
	n := 0
	for range v.EachJobIn(api.JobHeld, api.JobPending) {
		n++
		if n == 2 {
			break
		}
	}
	if n != 2 {
		t.Errorf("a stopped iterator yielded %d", n)
	}
}
