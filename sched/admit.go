package sched

import (
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/reason"
	"github.com/troupe-hpc/troupe/internal/units"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/sched/admission"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sched/state"
)

// Submissions are admitted by sched/admission (the one path for submit,
// batch submit, the dry run's check and the web page); this file is the
// controller's side of it: the state as admission reads it, and the row
// an admitted job becomes.

// admit runs admission on req against the current state; ahead are the
// jobs before it in the same batch. A refusal is an ErrInvalid (or
// ErrQueueFull) that wraps the *admission.Refusal, whose problems the
// API's error body lists.
func (s *lifecycle) admit(v *state.Snapshot, req api.SubmitRequest, ahead []*admission.Job) (*admission.Job, error) {
	j, err := admission.Admit(req, admitView{v, &s.nodes}, s.admission(), ahead)
	if err == nil {
		if p := licenseSchemaProblem(j, s.raft.WriteSchema()); p != nil {
			err = &admission.Refusal{Problems: []admission.Problem{*p}}
		}
	}
	var r *admission.Refusal
	switch {
	case err == nil:
		return j, nil
	case errors.As(err, &r) && r.QueueFull:
		return nil, fmt.Errorf("%w: %w", ErrQueueFull, err)
	}
	return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
}

// admission is schedd's settings as admission takes them.
func (s *lifecycle) admission() admission.Settings {
	set := admission.Settings{MaxJobInput: s.cfg.MaxJobInput, MaxQueued: s.cfg.MaxQueued, MaxQueuedPerUser: s.cfg.MaxQueuedPerUser,
		MaxQueuedInputPerUser: s.cfg.MaxQueuedInputPerUser, Images: s.cfg.Images}
	if set.MaxQueuedPerUser < 0 {
		set.MaxQueuedPerUser = 0 // unlimited
	}
	if set.MaxQueuedInputPerUser < 0 {
		set.MaxQueuedInputPerUser = 0 // unlimited
	}
	return set
}

// newJob admits req and makes the job to store, with its session and
// kernel ids; ahead as for admit.
func (s *lifecycle) newJob(req api.SubmitRequest, ahead []*admission.Job) (*state.Job, *admission.Job, error) {
	a, err := s.admit(s.st.Snapshot(), req, ahead)
	if err != nil {
		return nil, nil, err
	}
	j := jobRow(a)
	for i := range j.Containers {
		j.Containers[i].KernelID = uuid.NewString()
	}
	j.SessionID = j.Containers[0].KernelID
	return j, a, nil
}

// jobRow is the row an admitted job is stored as, less its ids.
func jobRow(a *admission.Job) *state.Job {
	j := &state.Job{
		RequestID: a.RequestID,
		Name:      a.Spec.Name, User: a.User, UID: a.UID, GID: a.GID, Cwd: a.Cwd,
		Partition: a.Partition, Account: a.Account, Reservation: a.Spec.Reservation, Walltime: a.Walltime, QOS: a.QOS,
		Spec: rowSpec(&a.Spec), Licenses: a.Licenses, State: api.JobPending,
		Reason:      reason.Waiting(a.Held, a.DependsOn != nil, false),
		Interactive: a.Interactive,
	}
	j.InputBytes, _ = a.Spec.InputSize()
	if a.DependsOn != nil {
		j.DependsOn = rowDependency(a.DependsOn)
	}
	if a.Held {
		j.State = api.JobHeld
	}
	for _, c := range a.Containers {
		j.Containers = append(j.Containers, rowContainer(c))
	}
	return j
}

// rowSpec is what the row keeps of job file s beyond its containers
// (their resources, roles, and the walltime, partition and account in
// force are resolved into the row).
func rowSpec(s *jobspec.Job) state.Spec {
	out := state.Spec{
		Priority: s.Priority, Requeue: s.Requeue, SSH: s.SSH,
		Cluster: state.Cluster{Size: s.Cluster.Size, Mode: s.Cluster.Mode},
		Image:   s.Image, Command: s.Command, Workdir: s.Workdir, Env: s.Env,
		Output: s.Output, Error: s.Error,
	}
	for _, m := range s.Mounts {
		out.Mounts = append(out.Mounts, state.Mount(m))
	}
	for _, sv := range s.Services {
		out.Services = append(out.Services, state.Service(sv))
	}
	if s.Array != nil {
		out.Array = &state.ArrayRequest{Range: s.Array.Range, MaxRunning: s.Array.MaxRunning}
	}
	if s.Mail != nil {
		m := state.Mail(*s.Mail)
		out.Mail = &m
	}
	if s.Signal != nil {
		w := state.Warning(*s.Signal)
		out.Signal = &w
	}
	return out
}

// rowContainer is container c of a job file as a row holds it, pending:
// the one place a job file's cpu becomes millicores
// (units.MilliCPU).
func rowContainer(c jobspec.Container) state.Container {
	return state.Container{
		Host: c.Host, Role: c.Role, Idx: c.Idx, Rank: c.Rank, Image: c.Image, Command: c.Command,
		CPUMilli: units.MilliCPU(c.Resources.CPU), Memory: c.Resources.Memory, GPU: c.Resources.GPU,
		State: api.ContainerPending,
	}
}

// rowDependency is dependency d as a row keeps it (no statuses: those
// are worked out when answering).
func rowDependency(d *api.Dependency) *state.Dependency {
	out := &state.Dependency{Any: d.Any}
	for _, c := range d.Conditions {
		out.Conditions = append(out.Conditions, state.Condition{Kind: string(c.Kind), JobID: c.JobID, Index: c.Index})
	}
	return out
}

// admitView is a state snapshot as admission reads it.
type admitView struct {
	*state.Snapshot
	nodes *nodeCache
}

// Target is job id for a dependency: array elements are named through
// their array's row.
func (a admitView) Target(id uint64) (admission.Target, bool) {
	o := a.Job(id)
	if o == nil {
		return admission.Target{}, false
	}
	if o.Array == nil {
		return admission.Target{}, true
	}
	return admission.Target{Array: true, Indices: o.Array.Indices}, true
}

// Submitted counts user's jobs in part that have not ended, an array's
// own row once (its elements not).
func (a admitView) Submitted(user, part string) int {
	n := 0
	for _, o := range a.JobsOf(user) {
		if !o.State.Terminal() && o.User == user && o.Partition == part && o.ArrayID == 0 {
			n++
		}
	}
	return n
}

// Reservation is the reservation name's users and accounts.
func (a admitView) Reservation(name string) (users, accounts []string, ok bool) {
	r := a.Snapshot.Reservation(name)
	if r == nil {
		return nil, nil, false
	}
	return r.Users, r.Accounts, true
}

// NeverFits asks the node cache whether the job could ever be placed.
func (a admitView) NeverFits(j *admission.Job) string {
	return a.nodes.check(a.Snapshot, jobRow(j))
}

// partitionCapacity is how many up nodes part has and what they hold
// together, for the dry run's notes.
func (s *lifecycle) partitionCapacity(v *state.Snapshot, part string) (int, api.Resources) {
	var (
		n     int
		total api.Resources
	)
	for _, nd := range s.nodes.empty(v) {
		if slices.Contains(nd.Partitions, part) {
			n++
			total.CPUMilli += nd.Capacity.CPUMilli
			total.Memory += nd.Capacity.Memory
			total.GPU += nd.Capacity.GPU
		}
	}
	return n, total
}

// neverFits says why j can never run on nodes, the partition's largest
// named.
func neverFits(j *state.Job, nodes []core.Node) string {
	var big core.Node
	for _, n := range nodes {
		if n.Capacity.CPUMilli > big.Capacity.CPUMilli || (n.Capacity.CPUMilli == big.Capacity.CPUMilli && n.Capacity.GPU > big.Capacity.GPU) {
			big = n
		}
	}
	var r state.Resources
	if len(j.Containers) > 0 {
		r = j.Containers[0].Res() // main1's: the job file's resources but a role's
	}
	want := fmt.Sprintf("cpu %g, memory %s", float64(r.CPUMilli)/1000, units.FormatSizeRounded(r.Memory))
	has := fmt.Sprintf("cpu %g and memory %s", float64(big.Capacity.CPUMilli)/1000, units.FormatSizeRounded(big.Capacity.Memory))
	if r.GPU > 0 {
		want += fmt.Sprintf(", gpu %g", r.GPU)
		has = fmt.Sprintf("cpu %g, memory %s and %g gpus", float64(big.Capacity.CPUMilli)/1000, units.FormatSizeRounded(big.Capacity.Memory), big.Capacity.GPU)
	}
	return fmt.Sprintf("job can never run in partition %s: %d × (%s) %s does not fit; the largest node, %s, has %s",
		j.Partition, len(j.Containers), want, j.Spec.Cluster.Mode, big.Name, has)
}
