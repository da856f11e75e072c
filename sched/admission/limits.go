package admission

import (
	"fmt"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/units"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sched/partition"
)

// Shape is what a partition's static limits judge of a job.
type Shape struct {
	Account    string        // the resolved account ("" without a tree)
	Mode       string        // cluster mode; "" is single-node
	Containers int           // cluster size
	Walltime   time.Duration // as asked; 0 takes the partition's default
}

// PartitionLimits lists the static limits of partition p that a job of
// shape s breaks (none: nil): an account or cluster mode the partition
// does not take, a cluster size or walltime above its maximum. Submit
// refuses such a job; a queued job that breaks one after a reconfig
// waits with reason PartitionLimit (the scheduling pass asks the same).
// Each problem's Path is the spec setting at fault.
func PartitionLimits(cfg *partition.Config, p *partition.Partition, s Shape) []Problem {
	l := JobLimits(cfg, p)
	j := core.Job{Mode: s.Mode, Containers: make([]core.Res, s.Containers), Walltime: s.Walltime}
	if cfg.HasTree() {
		j.Accounts = cfg.AccountPath(s.Account)
	}
	b := l.Breaches(&j)
	if b == 0 {
		return nil
	}
	mode := s.Mode
	if mode == "" {
		mode = jobspec.ModeSingleNode
	}
	var out []Problem
	add := func(path, format string, args ...any) {
		out = append(out, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if b&core.BreachAccount != 0 {
		add("account", "partition %s does not take jobs of account %s; allowed accounts: %s", p.Name, s.Account, strings.Join(p.AllowedAccounts, ", "))
	}
	if b&core.BreachMode != 0 {
		add("cluster.mode", "cluster mode %s is not allowed in partition %s; allowed modes: %s", mode, p.Name, strings.Join(p.AllowedModes, ", "))
	}
	if b&core.BreachSize != 0 {
		add("cluster.size", "cluster size %d exceeds partition %s's limit of %d (max_cluster_size)", s.Containers, p.Name, p.MaxClusterSize)
	}
	if b&core.BreachWalltime != 0 {
		add("walltime", "walltime %s exceeds partition %s's limit of %s (max_walltime)", units.FormatDuration(s.Walltime), p.Name, units.FormatDuration(p.MaxWalltime))
	}
	return out
}

// JobLimits is the core's form of what partition p takes of each job
// (core.JobLimits, judged by its Breaches): submission refuses a job
// outside them (PartitionLimits, in words); the core keeps a queued job
// that a new config no longer takes waiting PartitionLimit.
func JobLimits(cfg *partition.Config, p *partition.Partition) core.JobLimits {
	l := core.JobLimits{MaxWalltime: p.MaxWalltime, MaxSize: p.MaxClusterSize, Modes: p.AllowedModes}
	if cfg.HasTree() {
		l.Accounts = p.AllowedAccounts
	}
	return l
}

// Limits is the core's form of a partition's per-user limits: the core
// enforces them on every pass; UserCaps refuses at submit a job that
// alone is past them.
func Limits(l partition.Limits) core.Limits {
	return core.Limits{Jobs: l.MaxJobs, Res: core.Res{CPUMilli: units.MilliCPU(l.MaxCPU), Memory: l.MaxMemory, GPU: l.MaxGPU}}
}

// UserCaps is the per-user resource cap of partition p that a job of
// these containers exceeds alone (nil: none): a job that could never
// start within its user's limits.
func UserCaps(p *partition.Partition, containers []jobspec.Container) *Problem {
	need := Need(containers)
	l, caps := p.UserLimits, Limits(p.UserLimits).Res
	switch {
	case caps.CPUMilli > 0 && need.CPUMilli > caps.CPUMilli:
		return &Problem{Path: "resources.cpu", Message: fmt.Sprintf("the job needs %g cpus; partition %s lets one user hold %g (user_limits.max_cpu)", float64(need.CPUMilli)/1000, p.Name, l.MaxCPU)}
	case caps.Memory > 0 && need.Memory > caps.Memory:
		return &Problem{Path: "resources.memory", Message: fmt.Sprintf("the job needs %s of memory; partition %s lets one user hold %s (user_limits.max_memory)", units.FormatSizeRounded(need.Memory), p.Name, units.FormatSizeRounded(l.MaxMemory))}
	case caps.GPU > 0 && need.GPU > caps.GPU+1e-9:
		return &Problem{Path: "resources.gpu", Message: fmt.Sprintf("the job needs %g gpus; partition %s lets one user hold %g (user_limits.max_gpu)", need.GPU, p.Name, l.MaxGPU)}
	}
	return nil
}

// Need is what containers hold together.
func Need(containers []jobspec.Container) api.Resources {
	var need api.Resources
	for _, c := range containers {
		r := ContainerResources(c.Resources.CPU, c.Resources.Memory, c.Resources.GPU)
		need.CPUMilli += r.CPUMilli
		need.Memory += r.Memory
		need.GPU += r.GPU
	}
	return need
}

// ContainerResources is what one container holds in the units schedd
// schedules in: its cpu in millicores by units.MilliCPU, the one
// conversion (jobspec has refused a cpu under units.MinCPUMilli).
func ContainerResources(cpu float64, memory int64, gpu float64) api.Resources {
	return api.Resources{CPUMilli: units.MilliCPU(cpu), Memory: memory, GPU: gpu}
}
