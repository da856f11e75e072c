package sched

import (
	"fmt"
	"maps"
	"slices"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/admission"
	"github.com/troupe-hpc/troupe/sched/partition"
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

// licenseWarnings are what a reconfig to c says of the licenses in use
// as of v: a count now below what running jobs hold (they run on; no job
// that asks for it starts until they hold less), a license no longer
// defined that jobs hold or wait for.
func licenseWarnings(v *state.Snapshot, c *partition.Config) []string {
	var out []string
	for _, l := range Licenses(v) {
		switch def := c.License(l.Name); {
		case def == nil && (l.Used > 0 || l.Waiting > 0):
			out = append(out, fmt.Sprintf("license %s is no longer defined: running jobs hold %d of it, and the %d queued jobs that ask for it wait (reason Licenses) until it is again", l.Name, l.Used, l.Waiting))
		case def != nil && l.Used > def.Count:
			out = append(out, fmt.Sprintf("license %s: count %d is below the %d that running jobs hold; they run on, and no job that asks for it starts until they hold fewer than %d", l.Name, def.Count, l.Used, def.Count))
		}
	}
	return out
}

// licenseSchemaProblem is why job j, which asks for licenses, cannot be
// taken while the cluster's entries are written in schema schema (nil:
// it can): a peer of the previous release, which may still lead, would
// not count its licenses (state.LicenseSchema).
func licenseSchemaProblem(j *admission.Job, schema int) *admission.Problem {
	if len(j.Licenses) == 0 || schema >= state.LicenseSchema {
		return nil
	}
	return &admission.Problem{Path: "licenses", Message: fmt.Sprintf("licenses need every schedd of the cluster on this release: a rolling upgrade is under way (entries are written in schema %d for a peer of the previous release, which would not count them); submit again once every peer is upgraded", schema)}
}
