package sched

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/catalog"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// cluster is a real controller (raft on disk) behind a real HTTP server.
func cluster(t testing.TB) (*Server, *client.Client) {
	t.Helper()
	return clusterWith(t, Config{})
}

// clusterWith is cluster with cfg's settings (DataDir and Logger filled).
func clusterWith(t testing.TB, cfg Config) (*Server, *client.Client) {
	t.Helper()
	cfg.DataDir = t.TempDir()
	srv, c, stop := openConfig(t, cfg)
	t.Cleanup(stop)
	return srv, c
}

func spec(size int, mode string, cpu float64) jobspec.Job {
	return jobspec.Job{Name: "t", Image: "host", Command: []string{"true"},
		Cluster:   jobspec.Cluster{Size: size, Mode: mode},
		Resources: jobspec.Resources{CPU: cpu, Memory: 1 << 30}}
}

func register(t testing.TB, c *client.Client, name string, cpus int64) {
	t.Helper()
	_, err := c.Register(context.Background(), api.NodeRegister{Name: name, Addr: "127.0.0.1",
		Capacity: api.Resources{CPUMilli: cpus * 1000, Memory: 16 << 30}, Runtime: "process"})
	if err != nil {
		t.Fatal(err)
	}
}

// waitJob blocks on the job until cond holds.
func waitJob(t testing.TB, c *client.Client, id uint64, cond func(api.Job) bool) api.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var idx uint64
	for {
		j, i, err := c.Job(ctx, id, idx, 5*time.Second)
		if err != nil {
			t.Fatalf("waiting for job %d: %v", id, err)
		}
		if cond(j) {
			return j
		}
		idx = i
	}
}

func TestSubmitPlaceAndEnd(t *testing.T) {
	_, c := cluster(t)
	ctx := context.Background()
	register(t, c, "n1", 4)
	register(t, c, "n2", 4)

	res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(6, jobspec.ModeMultiNode, 1)), UID: 1000, GID: 1000, User: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	if res.JobID != 1 || res.Partition != DefaultPartition {
		t.Fatalf("submit answered %+v", res)
	}
	j := waitJob(t, c, 1, func(j api.Job) bool { return j.State == api.JobScheduled })
	if j.SessionID == "" || j.SessionID != j.Containers[0].KernelID {
		t.Fatalf("session id %q, main1 kernel id %q", j.SessionID, j.Containers[0].KernelID)
	}
	perNode := map[string]int{}
	for _, ct := range j.Containers {
		perNode[ct.Node]++
	}
	if perNode["n1"]+perNode["n2"] != 6 || perNode["n1"] == 0 || perNode["n2"] == 0 {
		t.Fatalf("6-container multi-node gang over two 4-cpu nodes placed as %v", perNode)
	}

	// The second job cannot fit until the first ends.
	res2, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(3, jobspec.ModeSingleNode, 1))})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, res2.JobID, func(j api.Job) bool { return j.State == api.JobPending && j.Reason == api.ReasonResources })

	// A nodelet's blocking poll sees its part of job 1.
	as, err := c.Assignments(ctx, "n1", 0, 0)
	if err != nil || len(as.Assignments) != 1 || len(as.Assignments[0].Hosts) != perNode["n1"] {
		t.Fatalf("assignments of n1: %+v, %v", as, err)
	}
	// Both nodes report; main1 exits; the subs are told to stop.
	var ups []api.ContainerUpdate
	for _, ct := range j.Containers {
		ups = append(ups, api.ContainerUpdate{JobID: 1, Host: ct.Host, State: api.ContainerRunning})
	}
	for _, n := range []string{"n1", "n2"} {
		if err := c.Report(ctx, n, api.ContainerReport{Updates: ups}); err != nil {
			t.Fatal(err)
		}
	}
	waitJob(t, c, 1, func(j api.Job) bool { return j.State == api.JobRunning })
	main := j.Containers[0]
	if err := c.Report(ctx, main.Node, api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: 1, Host: "main1", State: api.ContainerExited}}}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, 1, func(j api.Job) bool { return j.KillWanted })
	for _, ct := range j.Containers[1:] {
		if err := c.Report(ctx, ct.Node, api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: 1, Host: ct.Host, State: api.ContainerKilled}}}); err != nil {
			t.Fatal(err)
		}
	}
	if j := waitJob(t, c, 1, func(j api.Job) bool { return j.State.Terminal() }); j.State != api.JobCompleted {
		t.Fatalf("job 1 ended %s", j.State)
	}
	// Room is free: job 2 starts by itself.
	waitJob(t, c, res2.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
}

func TestSubmitRefusals(t *testing.T) {
	_, c := cluster(t)
	register(t, c, "n1", 2)
	tests := []struct {
		name string
		spec jobspec.Job
		want string
	}{
		{"never fits", spec(3, jobspec.ModeSingleNode, 1), "can never run in partition default"},
		{"unknown partition", func() jobspec.Job { s := spec(1, jobspec.ModeSingleNode, 1); s.Partition = "gpu"; return s }(), `partition "gpu" does not exist`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Submit(context.Background(), api.SubmitRequest{Spec: wire.ToAPI(tt.spec)})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("submit: %v, want %q", err, tt.want)
			}
		})
	}
	if l, _ := c.Jobs(context.Background(), 0, 0); len(l.Jobs) != 0 {
		t.Fatalf("refused submissions left %d jobs", len(l.Jobs))
	}
}

func TestBadBodies(t *testing.T) {
	_, c := cluster(t)
	ctx := context.Background()
	for _, tt := range []struct{ method, path, body, want string }{
		{"POST", "/v1/jobs", `{"spec": 3}`, "request body"},
		{"POST", "/v1/jobs", `{"nope": 1}`, "unknown field"},
		{"GET", "/v1/jobs/abc", ``, "not a positive number"},
		{"GET", "/v1/jobs/7", ``, "job 7: not found"},
		{"GET", "/v1/jobs?index=x", ``, "not a number"},
	} {
		var in any
		if tt.body != "" {
			in = jsonRaw(tt.body)
		}
		_, err := c.Do(ctx, tt.method, tt.path[:strings.IndexAny(tt.path+"?", "?")], query(tt.path), in, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %s %s: %v, want %q", tt.method, tt.path, tt.body, err, tt.want)
		}
	}
}

func TestSubmitValidatesBodies(t *testing.T) {
	_, c := cluster(t)
	s := spec(0, "ring", -1)
	_, err := c.Submit(context.Background(), api.SubmitRequest{Spec: wire.ToAPI(s)})
	if err == nil || !strings.Contains(err.Error(), "cluster mode \"ring\" is not valid") {
		t.Fatalf("submit of an invalid spec through the API: %v", err)
	}
}

func TestSubmitRefusesUnknownCatalogImage(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/images.hcl"
	if err := os.WriteFile(path, []byte("image \"pytorch-2.3\" {\n  source = \"/srv/images/pytorch-2.3.sif\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	images, err := catalog.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	_, c := clusterWith(t, Config{Images: images})
	s := spec(1, jobspec.ModeSingleNode, 1)
	s.Image = "tf-2.15"
	_, err = c.Submit(context.Background(), api.SubmitRequest{Spec: wire.ToAPI(s), Cwd: "/tmp"})
	if err == nil || !strings.Contains(err.Error(), `image "tf-2.15": unknown image (known images: pytorch-2.3`) {
		t.Fatalf("submit of an unknown image: %v", err)
	}
	s.Image = "pytorch-2.3"
	if _, err := c.Submit(context.Background(), api.SubmitRequest{Spec: wire.ToAPI(s), Cwd: "/tmp"}); err != nil {
		t.Fatalf("submit of a catalog image: %v", err)
	}
}

func TestHoldRelease(t *testing.T) {
	_, c := cluster(t)
	ctx := context.Background()
	register(t, c, "n1", 4)

	// Submitted held (bsub -H): it never starts, though room is free.
	res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	res2, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1))})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, res2.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	if j, _, _ := c.Job(ctx, res.JobID, 0, 0); j.State != api.JobHeld || j.Reason != api.ReasonHeld {
		t.Fatalf("held job after a pass: %s (%s), want HELD (Held)", j.State, j.Reason)
	}

	// A pending job (waiting for room) is held, and stays so once room frees.
	res3, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 4))})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, res3.JobID, func(j api.Job) bool { return j.Reason == api.ReasonResources })
	if j, err := c.Hold(ctx, res3.JobID); err != nil || j.State != api.JobHeld || j.Reason != api.ReasonHeld {
		t.Fatalf("hold: %s (%s), %v", j.State, j.Reason, err)
	}

	wantErr := func(err error, status int, msg string) {
		t.Helper()
		var ae *client.APIError
		if !asAPI(err, &ae) || ae.Status != status || !strings.Contains(ae.Message, msg) {
			t.Fatalf("got %v, want %d %q", err, status, msg)
		}
	}
	_, err = c.Hold(ctx, res2.JobID)
	wantErr(err, 409, "job 2 is SCHEDULED: only pending jobs can be held")
	_, err = c.Release(ctx, res2.JobID)
	wantErr(err, 409, "job 2 is SCHEDULED: only held jobs can be released")
	_, err = c.Hold(ctx, res3.JobID)
	wantErr(err, 409, "job 3 is already held")
	_, err = c.Release(ctx, 99)
	wantErr(err, 404, "not found")

	// Released, job 1 starts in the room left.
	if j, err := c.Release(ctx, res.JobID); err != nil || j.State != api.JobPending {
		t.Fatalf("release: %s, %v", j.State, err)
	}
	waitJob(t, c, res.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })

	// Job 3 needs the whole node: held, it does not start when the node
	// empties; released, it does.
	if _, err := c.Kill(ctx, res.JobID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kill(ctx, res2.JobID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{res.JobID, res2.JobID} {
		if err := c.Report(ctx, "n1", api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: id, Host: "main1", State: api.ContainerKilled}}}); err != nil {
			t.Fatal(err)
		}
		waitJob(t, c, id, func(j api.Job) bool { return j.State == api.JobCancelled })
	}
	res4, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1))})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, res4.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	if j, _, _ := c.Job(ctx, res3.JobID, 0, 0); j.State != api.JobHeld {
		t.Fatalf("held job 3 after a pass with room: %s", j.State)
	}
	if _, err := c.Kill(ctx, res4.JobID); err != nil {
		t.Fatal(err)
	}
	if err := c.Report(ctx, "n1", api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: res4.JobID, Host: "main1", State: api.ContainerKilled}}}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, res4.JobID, func(j api.Job) bool { return j.State == api.JobCancelled })
	if _, err := c.Release(ctx, res3.JobID); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, res3.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
}

// TestSubmitAnswersIndex: POST /v1/jobs gives the state index the job was
// stored at, so that bsub --wait through a lagging follower can block
// until that peer holds it (issue 14 item 6a).
func TestSubmitAnswersIndex(t *testing.T) {
	srv, c := cluster(t)
	res, err := c.Submit(context.Background(), api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), UID: 1000, GID: 1000, User: "ada", Hold: true}) // held: nothing moves it after
	if err != nil {
		t.Fatal(err)
	}
	v := srv.st.Snapshot()
	if res.Index == 0 || v.Job(res.JobID) == nil {
		t.Fatalf("submit answered %+v", res)
	}
	if j := v.Job(res.JobID); j.ModifyIndex > res.Index {
		t.Fatalf("job stored at index %d, after the answered %d", j.ModifyIndex, res.Index)
	}
}

// TestNodeGPUShares (issue 14 item 6h): the node list shows each GPU
// device's allocated share and the jobs holding it, which bhosts -l
// prints so that a user sees why gpu = 0.6 waits.
func TestNodeGPUShares(t *testing.T) {
	_, c := cluster(t)
	ctx := context.Background()
	if _, err := c.Register(ctx, api.NodeRegister{Name: "g1", Addr: "127.0.0.1", Runtime: "process",
		Capacity: api.Resources{CPUMilli: 8000, Memory: 16 << 30, GPU: 2}}); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for range 2 {
		sp := spec(1, jobspec.ModeSingleNode, 1)
		sp.Resources.GPU = 0.6
		res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(sp), UID: 1000, GID: 1000, User: "ada"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.JobID)
		waitJob(t, c, res.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	}
	list, err := c.Nodes(ctx)
	if err != nil || len(list.Nodes) != 1 {
		t.Fatalf("nodes %+v, %v", list, err)
	}
	got := list.Nodes[0].GPUs
	if len(got) != 2 {
		t.Fatalf("gpus %+v: want 2 devices", got)
	}
	var held []uint64
	for _, g := range got {
		if g.Allocated < 0.6-1e-9 || g.Allocated > 0.6+1e-9 || len(g.Jobs) != 1 {
			t.Errorf("device %d: %+v, want 0.6 held by one job", g.Device, g)
			continue
		}
		held = append(held, g.Jobs[0])
	}
	if len(held) == 2 && (held[0] == held[1] || held[0]+held[1] != ids[0]+ids[1]) {
		t.Errorf("devices held by jobs %v, want %v one each", held, ids)
	}
}
