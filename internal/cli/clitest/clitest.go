// Package clitest helps test the user tools: a fake schedd serving the
// api types, fixed fixtures and clock, and an address nothing listens on.
//
// A test helper: no binary may import it (cmd/layout_test.go checks). Of
// troupe it imports internal/api and jobspec only.
package clitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
)

// Schedd is a fake schedd: handlers registered with Handle answer, every
// request is counted.
type Schedd struct {
	Addr string // give to --addr
	mux  *http.ServeMux
	mu   sync.Mutex
	reqs []string
}

// NewSchedd starts a fake schedd, closed when the test ends.
func NewSchedd(t testing.TB) *Schedd {
	s := &Schedd{mux: http.NewServeMux()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r.Method+" "+r.URL.RequestURI())
		s.mu.Unlock()
		s.mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.Addr = srv.URL
	return s
}

// Handle answers requests matching pattern (http.ServeMux syntax, e.g.
// "GET /v1/jobs/{id}").
func (s *Schedd) Handle(pattern string, h http.HandlerFunc) { s.mux.HandleFunc(pattern, h) }

// Requests are the requests seen so far, as "METHOD /path?query".
func (s *Schedd) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs...)
}

// JSON answers v with status and the index header.
func JSON(w http.ResponseWriter, status int, index uint64, v any) {
	w.Header().Set("Content-Type", "application/json")
	if index > 0 {
		w.Header().Set(api.IndexHeader, strconv.FormatUint(index, 10))
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Error answers schedd's error body.
func Error(w http.ResponseWriter, status int, msg string) {
	JSON(w, status, 0, api.Error{Error: msg})
}

// Unreachable is an address where nothing listens: a socket path in a
// fresh temporary directory.
func Unreachable(t testing.TB) string {
	return "unix://" + filepath.Join(t.TempDir(), "schedd.sock")
}

// Now is the fixed clock of the fixtures, in a fixed zone so that
// renderings do not depend on the machine's.
var Now = time.Date(2025, 3, 14, 15, 0, 0, 0, time.FixedZone("CET", 3600))

func at(d time.Duration) time.Time { return Now.Add(-d).UTC() }

// Jobs are fixtures covering every column: pending with a reason, held,
// running over two nodes, completed, failed with a container message,
// and cancelled before it started.
func Jobs() []api.Job {
	spec := func(name string, size int) api.JobSpec {
		return api.JobSpec{
			Name:      name,
			Partition: "gpu",
			Account:   "vision",
			Walltime:  2 * time.Hour,
			Cluster:   api.Cluster{Size: size, Mode: jobspec.ModeMultiNode},
			Resources: api.JobResources{CPU: 4, Memory: 16 << 30, GPU: 0.5},
			Image:     "pytorch-2.3",
			Command:   []string{"mpirun", "python", "train.py", "--lr", "0.1 warm"},
			Env:       map[string]string{"EPOCHS": "10", "A": "1"},
			Output:    "train-%j.out",
		}
	}
	containers := func(id uint64, nodes []string, state api.ContainerState, exit int) []api.Container {
		var cs []api.Container
		for i, n := range nodes {
			host, role, idx := "main1", jobspec.RoleMain, 1
			if i > 0 {
				host, role, idx = "sub"+strconv.Itoa(i), jobspec.RoleSub, i
			}
			cs = append(cs, api.Container{
				ContainerSpec: api.ContainerSpec{Host: host, Role: role, Idx: idx, Rank: i, Image: "pytorch-2.3",
					Resources: api.JobResources{CPU: 4, Memory: 16 << 30, GPU: 0.5}},
				KernelID: fmt.Sprintf("%08d-0000-4000-8000-%012d", id, i),
				Node:     n,
				NodeAddr: "10.0.0." + strconv.Itoa(len(n)),
				Addr:     addr(n, i),
				State:    state,
				ExitCode: exit,
			})
		}
		return cs
	}
	running := api.Job{
		Network: &api.Network{VNI: 4012, Subnet: "10.64.12.0/24"}, Account: "vision", Walltime: 2 * time.Hour,
		ID: 12, SessionID: "00000000-0000-4000-8000-120000000000", Name: "train", User: "alice", UID: 1000, GID: 1000,
		Cwd: "/home/alice/proj", Partition: "gpu", Spec: spec("train", 4), State: api.JobRunning, Licenses: map[string]int{"matlab": 2},
		Containers: containers(12, []string{"node01", "node01", "node02", "node02"}, api.ContainerRunning, 0),
		Submitted:  at(2 * time.Hour), Started: at(time.Hour + 2*time.Minute + 3*time.Second), ModifyIndex: 40,
	}
	pending := api.Job{
		ID: 15, Name: "sweep", User: "bob", UID: 1001, GID: 1001, Cwd: "/home/bob", Partition: "gpu",
		Spec: spec("sweep", 2), State: api.JobPending, Reason: api.ReasonResources,
		Containers: containers(15, []string{"", ""}, api.ContainerPending, 0),
		Submitted:  at(5*time.Minute + 7*time.Second), ModifyIndex: 41, EstimatedStart: at(-45 * time.Minute),
		Priority: 12290, PriorityFactors: &api.PriorityFactors{Age: 5, FairShare: 9000, JobSize: 295, Partition: 3000, Nice: -10, Total: 12290},
		QueuePosition: 3, QueueLength: 17,
	}
	held := api.Job{
		ID: 16, Name: "later", User: "bob", UID: 1001, GID: 1001, Cwd: "/home/bob", Partition: "cpu",
		Spec: spec("later", 1), State: api.JobHeld, Reason: api.ReasonHeld,
		Submitted: at(26*time.Hour + 3*time.Minute), ModifyIndex: 42,
	}
	completed := api.Job{
		ID: 3, SessionID: "00000000-0000-4000-8000-030000000000", Name: "prep", User: "alice", UID: 1000, GID: 1000,
		Cwd: "/home/alice/proj", Partition: "cpu", Spec: spec("prep", 1), State: api.JobCompleted,
		Containers: containers(3, []string{"node03"}, api.ContainerExited, 0),
		Submitted:  at(5 * time.Hour), Started: at(4 * time.Hour), Ended: at(3*time.Hour + 30*time.Minute), ModifyIndex: 20,
	}
	failed := api.Job{
		ID: 7, SessionID: "00000000-0000-4000-8000-070000000000", Name: "bad\tname", User: "carol", UID: 1002, GID: 1002,
		Cwd: "/home/carol", Partition: "gpu", Spec: spec("bad\tname", 2), State: api.JobFailed, ExitCode: 3,
		Containers: containers(7, []string{"node02", "node02"}, api.ContainerExited, 3),
		Submitted:  at(3 * time.Hour), Started: at(3 * time.Hour), Ended: at(2*time.Hour + 59*time.Minute + 55*time.Second), ModifyIndex: 30,
	}
	failed.Containers[1].State = api.ContainerFailed
	failed.Containers[1].ExitCode = 127
	failed.Containers[1].Message = "exec: \"python\": executable file not found in $PATH"
	cancelled := api.Job{
		ID: 9, Name: "oops", User: "alice", UID: 1000, GID: 1000, Cwd: "/home/alice", Partition: "cpu",
		Spec: spec("oops", 1), State: api.JobCancelled, Reason: "cancelled by alice",
		Submitted: at(time.Hour), Ended: at(50 * time.Minute), ModifyIndex: 35,
	}
	cancelled.Spec.Walltime = 0
	cancelled.Spec.Resources.GPU = 0
	return []api.Job{running, pending, held, completed, failed, cancelled}
}

// addr is a placed container's session address, "" before placement.
func addr(node string, rank int) string {
	if node == "" {
		return ""
	}
	return "10.64.0." + strconv.Itoa(rank+2)
}

// Job returns the fixture with id; it panics if there is none.
func Job(id uint64) api.Job {
	for _, j := range Jobs() {
		if j.ID == id {
			return j
		}
	}
	panic("clitest: no fixture job " + strconv.FormatUint(id, 10))
}

// Nodes are node fixtures: busy, idle, down, one without GPUs, one
// draining (jobs still run) and one drained.
func Nodes() []api.Node {
	const gib = 1 << 30
	return []api.Node{
		{Name: "node02", Addr: "10.0.0.2", State: api.NodeUp, Runtime: "runc", OCIRuntime: "crun 1.8.1",
			Labels: []string{"gpu", "rack=a"}, Partitions: []string{"gpu"},
			Capacity:      api.Resources{CPUMilli: 64000, Memory: 256 * gib, GPU: 4},
			Allocated:     api.Resources{CPUMilli: 16000, Memory: 64 * gib, GPU: 1.5},
			GPUs:          []api.NodeGPU{{Device: 0, Allocated: 1, Jobs: []uint64{7}}, {Device: 1, Allocated: 0.5, Jobs: []uint64{12}}, {Device: 2}, {Device: 3}},
			LastHeartbeat: at(3 * time.Second), Registered: at(48 * time.Hour)},
		{Name: "node01", Addr: "10.0.0.1", State: api.NodeUp, Runtime: "runc", OCIRuntime: "runc 1.1.5",
			Labels: []string{"gpu", "rack=a"}, Partitions: []string{"gpu"},
			Capacity:  api.Resources{CPUMilli: 64000, Memory: 251*gib + gib/2, GPU: 4},
			Allocated: api.Resources{CPUMilli: 8500, Memory: 32 * gib, GPU: 1},
			GPUs: []api.NodeGPU{{Device: 0, Allocated: 0.5, Jobs: []uint64{12}}, {Device: 1, Allocated: 0.25, Jobs: []uint64{14}},
				{Device: 2, Allocated: 0.25, Jobs: []uint64{14, 15}}, {Device: 3, Allocated: 0}},
			LastHeartbeat: at(2 * time.Second), Registered: at(48 * time.Hour)},
		{Name: "node03", Addr: "10.0.0.3", State: api.NodeDown, Runtime: "process",
			Partitions: []string{"cpu"}, Reason: "Not responding",
			Capacity:      api.Resources{CPUMilli: 2000, Memory: 4 * gib},
			LastHeartbeat: at(10 * time.Minute), Registered: at(72 * time.Hour)},
		{Name: "node04", Addr: "10.0.0.4", State: api.NodeDraining, Runtime: "runc",
			Labels: []string{"rack=b"}, Partitions: []string{"cpu"},
			Drain: true, Reason: "DIMM errors, ticket 4711", DrainedBy: "root", DrainedAt: at(20 * time.Minute),
			Capacity:      api.Resources{CPUMilli: 32000, Memory: 128 * gib},
			Allocated:     api.Resources{CPUMilli: 4000, Memory: 16 * gib},
			LastHeartbeat: at(time.Second), Registered: at(72 * time.Hour)},
		{Name: "node05", Addr: "10.0.0.5", State: api.NodeDrained, Runtime: "runc",
			Labels: []string{"rack=b"}, Partitions: []string{"cpu"},
			Drain: true, Reason: "firmware upgrade", DrainedBy: "root", DrainedAt: at(time.Hour),
			Capacity:      api.Resources{CPUMilli: 32000, Memory: 128 * gib},
			LastHeartbeat: at(time.Second), Registered: at(72 * time.Hour)},
	}
}

// Partitions are partition fixtures: cpu (the default) and gpu with
// limits on walltime, size, accounts and modes.
func Partitions() api.PartitionList {
	const gib = 1 << 30
	return api.PartitionList{Policy: "fairshare", Index: 3, Partitions: []api.PartitionInfo{
		{Name: "cpu", Default: true, Nodes: []string{"node03"}, GPUQuantum: 0.25,
			Capacity: api.Resources{CPUMilli: 2000, Memory: 4 * gib}},
		{Name: "gpu", Nodes: []string{"node01", "node02"}, MaxWalltime: 72 * time.Hour, MaxClusterSize: 16,
			AllowedAccounts: []string{"vision", "nlp"}, GPUQuantum: 0.25,
			Capacity: api.Resources{CPUMilli: 128000, Memory: 512 * gib, GPU: 8}},
	}}
}

// Submission is a fixed bsub request for dry-run renderings.
func Submission() api.SubmitRequest {
	j := Job(12)
	j.Spec.Mounts = []api.Mount{{Name: "data", Source: "/shared/imagenet", Target: "/home/work/data", ReadOnly: true}}
	j.Spec.Workdir = "/home/work"
	return api.SubmitRequest{Spec: j.Spec, Cwd: j.Cwd, User: j.User, UID: j.UID, GID: j.GID, Source: "train.hcl"}
}

// GoldenPath is the path of testdata/cli/name in the repository.
func GoldenPath(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", "cli", name)
}

// Golden returns the content of testdata/cli/name (written by go test
// ./internal/cli -update).
func Golden(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(GoldenPath(name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// DependentJob is a pending job that waits for jobs 12 (running) and 3
// (completed), as schedd answers it: each condition with its status.
func DependentJob() api.Job {
	j := Job(15)
	j.ID, j.Name, j.Reason = 17, "post", api.ReasonDependency
	j.Priority, j.PriorityFactors, j.QueuePosition, j.QueueLength, j.EstimatedStart = 0, nil, 0, 0, time.Time{}
	j.DependsOn = &api.Dependency{Conditions: []api.Condition{
		{Kind: api.DepDone, JobID: 12, Status: api.DepWaiting, JobState: api.JobRunning},
		{Kind: api.DepEnded, JobID: 3, Status: api.DepSatisfied, JobState: api.JobCompleted},
	}}
	return j
}
