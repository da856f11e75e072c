package state

import "testing"

// A submit of a job that asks for licenses is schema 11's: the raft log
// does not write it for a peer of the previous release, which would
// ignore the licenses. A submit of jobs without licenses is any
// schema's.
func TestLicensesNeedTheirSchema(t *testing.T) {
	plain, licensed := &Job{Name: "a"}, &Job{Name: "b", Licenses: map[string]int{"matlab": 1}}
	for _, tt := range []struct {
		name string
		act  Submit
		want int
	}{
		{"no licenses", Submit{Jobs: []*Job{plain}}, 0},
		{"one job with licenses", Submit{Jobs: []*Job{licensed}}, LicenseSchema},
		{"a group, one with licenses", Submit{Jobs: []*Job{plain, licensed}, Each: true}, LicenseSchema},
	} {
		c := Command{Act: tt.act}
		if got := c.NeedsSchema(); got != tt.want {
			t.Errorf("%s: needs schema %d, want %d", tt.name, got, tt.want)
		}
	}
}
