package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/internal/reason"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// walledJob is shJob with a walltime.
func walledJob(name, script, walltime string) string {
	return fmt.Sprintf(`
job %q {
  image    = "host"
  walltime = %q
  command  = ["sh", "-c", %q]
  resources {
    cpu    = 1
    memory = "64MiB"
  }
}`, name, walltime, script)
}

// onlyNode is the name of the cluster's one node.
func (c *devCluster) onlyNode() string {
	c.t.Helper()
	out, errOut, code := c.run(c.dir, "bhosts", "-o", "json")
	var nodes []api.Node
	if code != 0 || json.Unmarshal([]byte(out), &nodes) != nil || len(nodes) != 1 {
		c.t.Fatalf("bhosts -o json: exit %d: %s%s", code, out, errOut)
	}
	return nodes[0].Name
}

// TestReservations on a real one-node cluster: who may use a
// reservation (root and nobody), then a maintenance window opening ~8s
// ahead: a job whose walltime crosses it does not start, a short one
// does; once it is open the node shows MAINT and nothing new starts;
// brsvs, scontrol show reservation and sinfo -T list it; deleted, the
// jobs it held back start.
func TestReservations(t *testing.T) {
	needRunc(t)
	c := startCluster(t, 1, "2")
	node := c.onlyNode()
	dir := searchable(t)
	mine := dirOf(t, nobodyUser, 0o755, dir, "nobody")

	// Who may: a reservation for root alone refuses nobody's job, by
	// name; admins only make them.
	if out, errOut, code := c.run(dir, "badmin", "reservation", "create", "acl", "--start", "now+2hours", "--duration", "10m",
		"--nodes", node, "--users", "root"); code != 0 {
		t.Fatalf("badmin reservation create acl: exit %d: %s%s", code, out, errOut)
	}
	job := filepath.Join(mine, "acl.hcl")
	if err := os.WriteFile(job, []byte(walledJob("acl", "true", "5m")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := c.runAs(nobodyUser.uid, mine, "bsub", "--reservation", "acl", job)
	if code == 0 || !strings.Contains(errOut, "user nobody may not run jobs in reservation acl; it admits users root") {
		t.Errorf("nobody's job in acl: exit %d, %q; want a refusal naming the reservation", code, errOut)
	}
	if _, errOut, code := c.runAs(nobodyUser.uid, mine, "badmin", "reservation", "create", "mine", "--start", "now+3hours",
		"--duration", "1h", "--nodes", node); code == 0 || !strings.Contains(errOut, "admin") {
		t.Errorf("nobody's badmin reservation create: exit %d, %q; want an admins-only refusal", code, errOut)
	}
	rootJob, _ := c.submit(dir, "acl-root", walledJob("acl-root", "true", "5m"), "-U", "acl")
	c.waitState(rootJob, 30*time.Second, func(j api.Job) bool { return j.Reason == reason.Reservation })
	if out, errOut, code := c.run(dir, "badmin", "reservation", "update", "acl", "--users", "root,nobody"); code != 0 {
		t.Fatalf("badmin reservation update: exit %d: %s%s", code, out, errOut)
	}
	out, errOut, code := c.runAs(nobodyUser.uid, mine, "bsub", "--reservation", "acl", job)
	if code != 0 || !strings.Contains(out, "is submitted") {
		t.Errorf("nobody's job once admitted: exit %d, %q %q", code, out, errOut)
	}

	// The maintenance window.
	start := time.Now().Add(8 * time.Second)
	if out, errOut, code := c.run(dir, "badmin", "reservation", "create", "pm", "--start", "now+8", "--duration", "1h",
		"--nodes", node, "--flags", "maint"); code != 0 {
		t.Fatalf("badmin reservation create pm: exit %d: %s%s", code, out, errOut)
	}
	long, _ := c.submit(dir, "long", walledJob("long", "sleep 600", "1h"))
	short, _ := c.submit(dir, "short", walledJob("short", "true", "3s"))
	j := c.waitState(long, 30*time.Second, func(j api.Job) bool { return j.Reason == reason.Maintenance })
	if j.State != api.JobPending {
		t.Fatalf("job %d (walltime 1h across the window) is %s", long, j.State)
	}
	if s := c.waitState(short, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() }); s.State != api.JobCompleted || !s.Started.Before(start) {
		t.Fatalf("job %d (3s, ends before the window): %s, started %v (window at %v)", short, s.State, s.Started, start)
	}
	if time.Now().After(start) {
		t.Logf("the window opened before the checks ahead of it ended; the machine is slow")
	}

	// Open: the node is in maintenance; a short job no longer starts.
	eventually.NoError(t, 30*time.Second, "bhosts shows the node in maintenance once the window opens", func() error {
		out, _, _ := c.run(dir, "bhosts")
		if strings.Contains(out, "MAINT") && strings.Contains(out, "Reserved for maintenance (pm)") {
			return nil
		}
		return errors.New(out)
	})
	late, _ := c.submit(dir, "late", walledJob("late", "true", "3s"))
	if j := c.waitState(late, 30*time.Second, func(j api.Job) bool { return j.Reason == reason.Maintenance }); j.State != api.JobPending {
		t.Fatalf("job %d submitted in the window: %s", late, j.State)
	}
	for name, args := range map[string][]string{
		"brsvs":                     {"brsvs"},
		"scontrol show reservation": {"troupe-slurm", "scontrol", "show", "reservation", "pm"},
		"sinfo -T":                  {"troupe-slurm", "sinfo", "-T"},
		"badmin reservation list":   {"badmin", "reservation", "list"},
	} {
		out, errOut, code := c.run(dir, args[0], args[1:]...)
		want := map[string]string{"brsvs": "pm                   sys", "scontrol show reservation": "ReservationName=pm ",
			"sinfo -T": "pm              ACTIVE", "badmin reservation list": "maint"}[name]
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d, want %q in:\n%s%s", name, code, want, out, errOut)
		}
	}

	// Deleted: the jobs it held back start.
	if _, errOut, code := c.run(dir, "bkill", strconv.FormatUint(long, 10)); code != 0 {
		t.Fatalf("bkill: %s", errOut)
	}
	if _, errOut, code := c.run(dir, "badmin", "reservation", "delete", "pm"); code != 0 {
		t.Fatalf("badmin reservation delete: %s", errOut)
	}
	if j := c.waitState(late, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() }); j.State != api.JobCompleted {
		t.Fatalf("job %d after the delete: %s", late, j.State)
	}

	// stop_jobs: a job still running on the node as the window opens is
	// stopped by the leader (TERM; cancelled, as it may not be
	// requeued), its reason naming the reservation.
	victim, _ := c.submit(dir, "victim", walledJob("victim", "trap 'exit 143' TERM; while :; do sleep 0.2; done", "1h"))
	c.waitState(victim, 30*time.Second, func(j api.Job) bool { return j.State == api.JobRunning })
	if out, errOut, code := c.run(dir, "badmin", "reservation", "create", "clear", "--start", "now+2", "--duration", "1h",
		"--nodes", node, "--flags", "maint,stop_jobs"); code != 0 {
		t.Fatalf("badmin reservation create clear: exit %d: %s%s", code, out, errOut)
	}
	if out, _, _ := c.run(dir, "badmin", "reservation", "list"); !strings.Contains(out, "stop_jobs") {
		t.Errorf("badmin reservation list does not show stop_jobs:\n%s", out)
	}
	if j := c.waitState(victim, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() }); j.State != api.JobCancelled ||
		!strings.Contains(j.Reason, "reservation clear opened") {
		t.Fatalf("job %d running as the stop_jobs window opened: %s %q; want CANCELLED naming the reservation", victim, j.State, j.Reason)
	}
}

// TestReservationFailover: a reservation made on a three-peer cluster
// is there after the leader is killed, and the new leader holds jobs
// back from it.
func TestReservationFailover(t *testing.T) {
	h := startHA(t)
	ctx := context.Background()
	eventually.True(t, 30*time.Second, "the nodelet registers", func() bool {
		l, err := h.cli.Nodes(ctx)
		return err == nil && len(l.Nodes) == 1
	})
	// A reservation is new in this release's schema: until every peer
	// has told the leader it reads it (a fresh cluster's first second)
	// the leader refuses it with a conflict, writing nothing; then it is
	// made.
	start := time.Now().Add(time.Hour)
	var r api.Reservation
	eventually.NoError(t, 20*time.Second, "the reservation made once every peer reads its schema", func() error {
		var err error
		r, err = h.cli.CreateReservation(ctx, api.ReservationRequest{Name: "pm", Start: start, Duration: 4 * time.Hour,
			Nodes: []string{"ha-n1"}, Flags: []string{api.FlagMaint, api.FlagWeekly}})
		var ae *client.APIError
		if err != nil && !(errors.As(err, &ae) && ae.Status == http.StatusConflict && strings.Contains(err.Error(), "schema is older")) {
			t.Fatalf("create: %v", err)
		}
		return err
	})
	_ = h.cmds[h.leader].Process.Signal(syscall.SIGKILL)
	_ = h.cmds[h.leader].Wait()
	spec := jobspec.Job{Name: "long", Image: "host", Command: []string{"true"}, Walltime: 2 * time.Hour,
		Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode}, Resources: jobspec.Resources{CPU: 1, Memory: 32 << 20}}
	res, err := h.cli.Submit(ctx, api.SubmitRequest{Cwd: h.dir, Spec: wire.ToAPI(spec)}) // the client finds the new leader
	if err != nil {
		t.Fatal(err)
	}
	l, err := h.cli.Reservations(ctx)
	if err != nil || len(l.Reservations) != 1 || l.Reservations[0].Name != "pm" || !l.Reservations[0].Start.Equal(r.Start) {
		t.Fatalf("after the failover: %+v, %v; want pm as made (%+v)", l.Reservations, err, r)
	}
	j := eventually.Value(t, 30*time.Second, "the new leader holds the 2h job back from the window", func() (api.Job, bool) {
		j, _, err := h.cli.Job(ctx, res.JobID, 0, 0)
		return j, err == nil && j.Reason == reason.Maintenance
	})
	if j.State != api.JobPending {
		t.Fatalf("job %d: %s", j.ID, j.State)
	}
}
