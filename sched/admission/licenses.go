package admission

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/troupe-hpc/troupe/sched/partition"
)

// LicenseProblems lists what is wrong with the licenses a job asks for
// under cfg (none: nil): a license the partitions file does not define
// (the message lists those it does), or more of one than its whole
// count, which the job could never get. Each problem's Path is
// "licenses.NAME", where the job file wrote it.
func LicenseProblems(cfg *partition.Config, asked map[string]int) []Problem {
	var out []Problem
	for _, name := range slices.Sorted(maps.Keys(asked)) {
		n, path := asked[name], "licenses."+name
		l := cfg.License(name)
		switch {
		case l == nil:
			out = append(out, Problem{Path: path, Message: fmt.Sprintf("license %q is not defined; known licenses: %s", name, knownLicenses(cfg))})
		case n > l.Count:
			out = append(out, Problem{Path: path, Message: fmt.Sprintf("the job asks for %d of license %s, which has %d in all (its count in the partitions file); it could never start", n, name, l.Count)})
		}
	}
	return out
}

func knownLicenses(cfg *partition.Config) string {
	var out []string
	for _, l := range cfg.Licenses {
		out = append(out, fmt.Sprintf("%s (%d)", l.Name, l.Count))
	}
	if len(out) == 0 {
		return "none (the partitions file has no license blocks)"
	}
	return strings.Join(out, ", ")
}
