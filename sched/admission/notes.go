package admission

import (
	"fmt"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/units"
)

// Notes says what may keep an admitted job pending, for bsub --dry-run:
// its partition has no up nodes now (nodes 0), or the job needs more
// than they hold together (capacity). Neither refuses it: nodes may
// come.
func Notes(j *Job, nodes int, capacity api.Resources) []string {
	if nodes == 0 {
		return []string{fmt.Sprintf("partition %s has no nodes now", j.Partition)}
	}
	need := Need(j.Containers)
	if need.CPUMilli > capacity.CPUMilli || need.Memory > capacity.Memory || need.GPU > capacity.GPU+1e-9 {
		return []string{fmt.Sprintf("the job needs more than partition %s's up nodes hold (%g cpu, %s memory, %g gpu)",
			j.Partition, float64(capacity.CPUMilli)/1000, units.FormatSizeRounded(capacity.Memory), capacity.GPU)}
	}
	return nil
}
