package cli

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Licenses writes a job's licenses as Slurm does: name:count, by name,
// joined by ','; "" for none.
func Licenses(l map[string]int) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(l)) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(name + ":" + strconv.Itoa(l[name]))
	}
	return b.String()
}
