package nodelet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// fakeSchedd is schedd in memory for the agent tests where a real one
// adds nothing: the test says what the node is assigned (assign, kill,
// unassign) and reads what the agent reported (reportLog). Nothing is
// scheduled and no report changes an assignment: a test that needs
// schedd's answer to a report (a session ending, a requeue, a lease)
// uses testSchedd, the real controller. Assignments go through JSON, as
// they would over HTTP, so the agent never shares memory with the fake.
type fakeSchedd struct {
	reportLog

	mu       sync.Mutex
	changed  chan struct{} // closed when the assignments change
	index    uint64
	assigned []api.Assignment
	regs     []api.NodeRegister
	// failReports answers that many reports with an error first, as a
	// schedd losing leadership would.
	failReports int
	lease       api.NodeLease // granted on register and heartbeat
	// silent answers heartbeats with an error, as a schedd the node
	// cannot reach: the lease is not renewed.
	silent bool
}

var _ schedd = (*fakeSchedd)(nil)

func newFakeSchedd() *fakeSchedd {
	return &fakeSchedd{changed: make(chan struct{}), index: 1,
		lease: api.NodeLease{Lease: time.Minute, Heartbeat: time.Second, NodeTimeout: 2 * time.Minute}}
}

// bump publishes a change of the assignments; f.mu is held.
func (f *fakeSchedd) bump() {
	f.index++
	close(f.changed)
	f.changed = make(chan struct{})
}

// assign puts job on the node, or replaces its assignment (matched by
// ID): every container of the job is the node's.
func (f *fakeSchedd) assign(job api.AssignedJob) {
	f.mu.Lock()
	defer f.mu.Unlock()
	asg := api.Assignment{Job: job}
	for _, c := range job.Containers {
		asg.Hosts = append(asg.Hosts, c.Host)
	}
	for i := range f.assigned {
		if f.assigned[i].Job.ID == job.ID {
			f.assigned[i] = asg
			f.bump()
			return
		}
	}
	f.assigned = append(f.assigned, asg)
	f.bump()
}

// update changes the assigned job id in place, as schedd would (a kill,
// a container's reported state).
func (f *fakeSchedd) update(id uint64, change func(*api.AssignedJob)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.assigned {
		if f.assigned[i].Job.ID == id {
			change(&f.assigned[i].Job)
			f.bump()
			return
		}
	}
	panic(fmt.Sprintf("fake schedd: job %d is not assigned", id))
}

// unassign takes job id off the node.
func (f *fakeSchedd) unassign(id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.assigned {
		if f.assigned[i].Job.ID == id {
			f.assigned = append(f.assigned[:i], f.assigned[i+1:]...)
			f.bump()
			return
		}
	}
}

// registered reports whether node registered.
func (f *fakeSchedd) registered(node string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.regs {
		if r.Name == node {
			return true
		}
	}
	return false
}

func (f *fakeSchedd) Register(_ context.Context, reg api.NodeRegister) (api.NodeRegistered, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.regs = append(f.regs, reg)
	return api.NodeRegistered{Node: api.Node{Name: reg.Name, Addr: reg.Addr}, NodeLease: f.lease}, nil
}

func (f *fakeSchedd) Heartbeat(_ context.Context, node string, _ api.NodeHeartbeat) (api.NodeLease, error) {
	if !f.registered(node) {
		return api.NodeLease{}, &client.APIError{Status: http.StatusNotFound, Message: "node " + node + " not found"}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.silent {
		return api.NodeLease{}, &client.APIError{Status: http.StatusServiceUnavailable, Message: "schedd unreachable"}
	}
	return f.lease, nil
}

// Assignments answers at once when index is behind, else when the
// assignments change, wait passes or ctx ends.
func (f *fakeSchedd) Assignments(ctx context.Context, _ string, index uint64, wait time.Duration) (api.Assignments, error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		f.mu.Lock()
		if f.index != index {
			as := api.Assignments{Assignments: f.assigned, Index: f.index}
			b, err := json.Marshal(as)
			f.mu.Unlock()
			if err != nil {
				return api.Assignments{}, err
			}
			var out api.Assignments
			return out, json.Unmarshal(b, &out)
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return api.Assignments{}, ctx.Err()
		case <-timer.C:
			index = 0 // answer what there is, as schedd does when the wait ends
		case <-ch:
		}
	}
}

func (f *fakeSchedd) Report(_ context.Context, _ string, rep api.ContainerReport) error {
	f.mu.Lock()
	if f.failReports > 0 {
		f.failReports--
		f.mu.Unlock()
		return &client.APIError{Status: http.StatusInternalServerError, Message: "raft: not leader"}
	}
	f.mu.Unlock()
	f.add(rep.Updates)
	return nil
}

// AttachRequests has none: it waits out wait.
func (f *fakeSchedd) AttachRequests(ctx context.Context, _ string, wait time.Duration) (api.AttachRequests, error) {
	select {
	case <-ctx.Done():
		return api.AttachRequests{}, ctx.Err()
	case <-time.After(wait):
		return api.AttachRequests{}, nil
	}
}

func (f *fakeSchedd) AttachConnect(context.Context, string, string) (io.ReadWriteCloser, error) {
	return nil, &client.APIError{Status: http.StatusNotFound, Message: "no such attach request"}
}

func (f *fakeSchedd) SetToken(string) {}

// fakeJob is job id as schedd would assign it to node1: a session of
// len(cmds) containers of the current user, main1 running cmds[0] (the
// subs wait), all of them ASSIGNED.
func fakeJob(t *testing.T, id uint64, cwd string, edit func(*jobspec.Job), cmds ...[]string) api.AssignedJob {
	t.Helper()
	spec := jobspec.Job{
		Name: "t", Image: "host", Command: cmds[0],
		Cluster:   jobspec.Cluster{Size: len(cmds), Mode: jobspec.ModeSingleNode},
		Resources: jobspec.Resources{CPU: 0.5, Memory: 64 << 20},
	}
	if edit != nil {
		edit(&spec)
	}
	if diags := spec.Validate(); diags.HasErrors() {
		t.Fatalf("job %d: %s", id, jobspec.FormatDiagnostics(diags))
	}
	j := api.AssignedJob{ID: id, Name: spec.Name, User: "alice", UID: uid(), GID: gid(), Cwd: cwd, Spec: wire.ToAPI(spec)}
	for _, c := range spec.Containers() {
		j.Containers = append(j.Containers, api.Container{ContainerSpec: wire.ContainerToAPI(c), KernelID: uuid.NewString(),
			State: api.ContainerAssigned, Node: "node1", NodeAddr: "127.0.0.1"})
	}
	j.SessionID = j.Containers[0].KernelID
	return j
}

// reportLog records the container updates schedd accepted, in arrival
// order.
type reportLog struct {
	mu      sync.Mutex
	updates []api.ContainerUpdate
}

func (l *reportLog) add(us []api.ContainerUpdate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.updates = append(l.updates, us...)
}

// states returns the updates reported for (job, host), in order.
func (l *reportLog) states(job uint64, host string) []api.ContainerUpdate {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []api.ContainerUpdate
	for _, u := range l.updates {
		if u.JobID == job && u.Host == host {
			out = append(out, u)
		}
	}
	return out
}

// waitState waits for state to be reported for (job, host).
func (l *reportLog) waitState(t *testing.T, job uint64, host string, state api.ContainerState) api.ContainerUpdate {
	t.Helper()
	var got []api.ContainerUpdate
	if !eventually.Within(20*time.Second, func() bool {
		got = l.states(job, host)
		return slices.ContainsFunc(got, func(u api.ContainerUpdate) bool { return u.State == state })
	}) {
		t.Fatalf("job %d %s never reported %s; got %+v", job, host, state, got)
	}
	return got[slices.IndexFunc(got, func(u api.ContainerUpdate) bool { return u.State == state })]
}

// startFakeAgent runs an agent against f until the test ends, like
// startAgentCause against a real schedd.
func startFakeAgent(t *testing.T, f *fakeSchedd, rt, stateDir string, mods ...func(*Config)) (Config, func(), func()) {
	t.Helper()
	return runAgent(t, Config{Addr: "http://127.0.0.1:1"}, parts{schedd: f}, rt, stateDir, mods...)
}
