// Package wire converts a job file (package jobspec) to and from the
// form the API carries it in (api.JobSpec, whose JSON is the job
// file's), so that the tools that parse job files (bsub, sbatch) send
// what they parsed and schedd checks what it received as a job file,
// while neither the API nor the tools that read no job file link the
// job file's parser, and the job file's package does not depend on the
// API.
package wire

import (
	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
)

// ToAPI is j as the API carries it (its source positions are not: see
// PositionsOf).
func ToAPI(j jobspec.Job) api.JobSpec {
	s := api.JobSpec{
		Name: j.Name, Partition: j.Partition, Account: j.Account, Reservation: j.Reservation, QOS: j.QOS, Walltime: j.Walltime, Priority: j.Priority,
		Requeue: j.Requeue, SSH: j.SSH, Cluster: api.Cluster(j.Cluster), Resources: api.JobResources(j.Resources),
		Image: j.Image, Command: j.Command, Workdir: j.Workdir, Env: j.Env, Output: j.Output, Error: j.Error,
		Licenses: j.Licenses,
	}
	for _, m := range j.Mounts {
		s.Mounts = append(s.Mounts, api.Mount(m))
	}
	for _, r := range j.Roles {
		ar := api.Role{Name: r.Name, Replicas: r.Replicas, Command: r.Command, Image: r.Image}
		if r.Resources != nil {
			res := api.JobResources(*r.Resources)
			ar.Resources = &res
		}
		s.Roles = append(s.Roles, ar)
	}
	for _, sv := range j.Services {
		s.Services = append(s.Services, api.Service(sv))
	}
	if j.Array != nil {
		a := api.ArraySpec(*j.Array)
		s.Array = &a
	}
	if j.Mail != nil {
		m := api.Mail(*j.Mail)
		s.Mail = &m
	}
	if j.Signal != nil {
		w := api.Warning(*j.Signal)
		s.Signal = &w
	}
	return s
}

// FromAPI is spec s as a job file's, without source positions.
func FromAPI(s api.JobSpec) jobspec.Job {
	j := jobspec.Job{
		Name: s.Name, Partition: s.Partition, Account: s.Account, Reservation: s.Reservation, QOS: s.QOS, Walltime: s.Walltime, Priority: s.Priority,
		Requeue: s.Requeue, SSH: s.SSH, Cluster: jobspec.Cluster(s.Cluster), Resources: jobspec.Resources(s.Resources),
		Image: s.Image, Command: s.Command, Workdir: s.Workdir, Env: s.Env, Output: s.Output, Error: s.Error,
		Licenses: s.Licenses,
	}
	for _, m := range s.Mounts {
		j.Mounts = append(j.Mounts, jobspec.Mount(m))
	}
	for _, r := range s.Roles {
		jr := jobspec.Role{Name: r.Name, Replicas: r.Replicas, Command: r.Command, Image: r.Image}
		if r.Resources != nil {
			res := jobspec.Resources(*r.Resources)
			jr.Resources = &res
		}
		j.Roles = append(j.Roles, jr)
	}
	for _, sv := range s.Services {
		j.Services = append(j.Services, jobspec.Service(sv))
	}
	if s.Array != nil {
		a := jobspec.Array(*s.Array)
		j.Array = &a
	}
	if s.Mail != nil {
		m := jobspec.Mail(*s.Mail)
		j.Mail = &m
	}
	if s.Signal != nil {
		w := jobspec.Warning(*s.Signal)
		j.Signal = &w
	}
	return j
}

// ContainerToAPI is container c of a session as the API carries it.
func ContainerToAPI(c jobspec.Container) api.ContainerSpec {
	return api.ContainerSpec{Host: c.Host, Role: c.Role, Idx: c.Idx, Rank: c.Rank, Image: c.Image, Command: c.Command,
		Resources: api.JobResources(c.Resources)}
}

// PositionsOf is where spec's settings were written (its Ranges), for
// api.SubmitRequest.Positions; nil for a spec from no file, or of more
// than api.MaxPositions settings.
func PositionsOf(spec *jobspec.Job) map[string]api.SourcePos {
	if len(spec.Ranges) == 0 || len(spec.Ranges) > api.MaxPositions {
		return nil
	}
	out := make(map[string]api.SourcePos, len(spec.Ranges))
	for path, r := range spec.Ranges {
		out[path] = api.SourcePos{Line: r.Start.Line, Column: r.Start.Column}
	}
	return out
}
