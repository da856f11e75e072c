package sched

import (
	"maps"
	"slices"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/state"
)

// Licenses is the site's licenses and their use as of v: each license of
// the config in file order, then any that running jobs still hold but
// the config no longer defines (total 0). Use is summed from the job
// rows (state.HoldsLicenses), as the scheduling pass sums it.
func Licenses(v *state.Snapshot) []api.License {
	cfg := v.Config()
	use := v.LicenseUse()
	waiting := map[string]int{}
	for _, j := range v.LiveJobs() {
		if j.Array == nil && (j.State == api.JobPending || j.State == api.JobHeld) && !state.HoldsLicenses(j) {
			for name := range j.Licenses {
				waiting[name]++
			}
		}
	}
	var out []api.License
	seen := map[string]bool{}
	add := func(name string, total int) {
		seen[name] = true
		out = append(out, api.License{Name: name, Total: total, Used: use[name], Free: max(0, total-use[name]), Waiting: waiting[name]})
	}
	for _, l := range cfg.Licenses {
		add(l.Name, l.Count)
	}
	for _, name := range slices.Sorted(maps.Keys(use)) {
		if !seen[name] {
			add(name, 0)
		}
	}
	return out
}
