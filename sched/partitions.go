package sched

import (
	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sched/state"
)

// Partitions describes the partitions in force as of v: their settings
// and the up nodes, pending and started jobs each holds now, and the
// licenses with their use.
func Partitions(v *state.Snapshot, empty []core.Node) api.PartitionList {
	cfg := v.Config()
	out := api.PartitionList{Source: cfg.Source, Policy: cfg.Policy, Partitions: []api.PartitionInfo{}}
	jobs := v.Jobs()
	nodes := coreNodes(empty, jobs)
	for i := range cfg.Partitions {
		p := &cfg.Partitions[i]
		l := p.UserLimits
		info := api.PartitionInfo{
			Name: p.Name, Default: p.Name == cfg.DefaultPartition, Nodes: []string{},
			NodePatterns: p.Nodes, Labels: p.Labels, MaxWalltime: p.MaxWalltime, DefaultWalltime: p.DefaultWalltime,
			MaxClusterSize: p.MaxClusterSize, PriorityTier: p.PriorityTier, AllowedAccounts: p.AllowedAccounts,
			AllowedModes: p.AllowedModes, GPUQuantum: p.GPUQuantum, MaxOutput: p.OutputLimit(),
			UserLimits: api.UserLimits{MaxJobs: l.MaxJobs, MaxSubmitJobs: l.MaxSubmitJobs, MaxCPU: l.MaxCPU, MaxMemory: l.MaxMemory, MaxGPU: l.MaxGPU},
		}
		for _, n := range nodes {
			for _, pn := range n.Partitions {
				if pn == p.Name {
					info.Nodes = append(info.Nodes, n.Name)
					info.Capacity.CPUMilli += n.Capacity.CPUMilli
					info.Capacity.Memory += n.Capacity.Memory
					info.Capacity.GPU += n.Capacity.GPU
				}
			}
		}
		for _, j := range jobs {
			switch {
			case j.Partition != p.Name || j.State.Terminal():
			case j.Array != nil: // an array's row: its elements without a row wait
				info.Pending += j.Array.Unmade()
			case j.State == api.JobPending || j.State == api.JobHeld:
				info.Pending++
			default:
				info.Running++
			}
		}
		out.Partitions = append(out.Partitions, info)
	}
	out.Licenses = Licenses(v)
	return out
}

// FairShare is badmin fairshare's table as of v.
func FairShare(v *state.Snapshot) api.FairShareList {
	cfg := v.Config()
	var users []string
	for _, j := range v.Jobs() {
		if j.State == api.JobPending {
			users = append(users, j.User)
		}
	}
	rows, _ := fairShare(cfg, v.Usage(), users)
	if rows == nil {
		rows = []api.FairShareRow{}
	}
	return api.FairShareList{HalfLife: cfg.HalfLife, Rows: rows}
}
