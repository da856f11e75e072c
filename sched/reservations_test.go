package sched

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/reason"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// Through the API: --count picks idle nodes; a reservation over a
// running job that would run into it is refused unless it ignores jobs;
// a job in a reservation waits for its window with the window's start
// as its estimate, and ReservationDeleted once it is deleted; an open
// maintenance window shows its node MAINT.
func TestReservationsAPI(t *testing.T) {
	_, c := cluster(t)
	ctx := context.Background()
	for _, n := range []string{"n1", "n2", "n3"} {
		register(t, c, n, 4)
	}
	busy, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1))}) // no walltime: never ends
	if err != nil {
		t.Fatal(err)
	}
	on := waitJob(t, c, busy.JobID, func(j api.Job) bool { return j.State == api.JobScheduled }).Containers[0].Node
	start := time.Now().Add(time.Hour).Truncate(time.Second)
	r, err := c.CreateReservation(ctx, api.ReservationRequest{Name: "course", Start: start, Duration: 2 * time.Hour, Count: 2,
		Users: []string{"ann"}, Flags: []string{"weekly"}})
	if err != nil || len(r.Nodes) != 2 || slices.Contains(r.Nodes, on) || !slices.IsSorted(r.Nodes) || r.State != api.ResvInactive {
		t.Fatalf("--count 2 with %s busy: %+v, %v", on, r, err)
	}
	var ae *client.APIError
	_, err = c.CreateReservation(ctx, api.ReservationRequest{Name: "pm", Start: start.Add(3 * time.Hour), Duration: time.Hour, Nodes: []string{on}, Flags: []string{"maint"}})
	if !asAPI(err, &ae) || ae.Status != http.StatusConflict || !strings.Contains(err.Error(), "ignore_jobs") {
		t.Fatalf("over a running job: %v, want 409 naming ignore_jobs", err)
	}
	for _, bad := range []api.ReservationRequest{
		{Name: "x", Start: start, Duration: time.Hour},
		{Name: "x", Start: start, Duration: time.Hour, Nodes: []string{"n9"}},
		{Name: "x", Start: start, Duration: time.Hour, Nodes: []string{"n1"}, Flags: []string{"sometimes"}},
		{Name: "1x", Start: start, Duration: time.Hour, Nodes: []string{"n1"}},
		{Name: "x", Start: start, Duration: time.Hour, Count: 4},
	} {
		if _, err := c.CreateReservation(ctx, bad); !asAPI(err, &ae) || ae.Status != http.StatusBadRequest {
			t.Errorf("%+v: %v, want 400", bad, err)
		}
	}

	// A job in the reservation waits for the window, its estimate the
	// window's start; another user's is refused.
	in := spec(1, jobspec.ModeSingleNode, 1)
	in.Reservation, in.Walltime = "course", time.Hour
	res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(in)})
	if err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, c, res.JobID, func(j api.Job) bool { return j.Reason == reason.Reservation })
	if j.State != api.JobPending || !j.EstimatedStart.Equal(start) {
		t.Errorf("job in the reservation: %s, estimated start %v, want %v", j.State, j.EstimatedStart, start)
	}
	// Updated: a later start moves the estimate.
	if r, err = c.UpdateReservation(ctx, "course", api.ReservationRequest{Start: start.Add(time.Hour), Update: []string{"start"}}); err != nil || !r.Start.Equal(start.Add(time.Hour)) || len(r.Users) != 1 {
		t.Fatalf("update: %+v, %v", r, err)
	}
	if _, err := c.UpdateReservation(ctx, "course", api.ReservationRequest{Update: []string{"name"}}); !asAPI(err, &ae) || ae.Status != http.StatusBadRequest {
		t.Errorf("update of the name: %v, want 400", err)
	}
	if err := c.DeleteReservation(ctx, "course"); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, res.JobID, func(j api.Job) bool { return j.Reason == reason.ReservationDeleted })
	if err := c.DeleteReservation(ctx, "course"); !client.IsNotFound(err) {
		t.Errorf("second delete: %v, want 404", err)
	}

	// A window open now, over the busy node (ignore_jobs): MAINT, and
	// a new job goes elsewhere.
	if _, err := c.CreateReservation(ctx, api.ReservationRequest{Name: "pm", Start: time.Now().Add(-time.Second), Duration: time.Hour,
		Nodes: []string{on}, Flags: []string{"maint", "ignore_jobs"}}); err != nil {
		t.Fatal(err)
	}
	if n := nodeState(t, c, on); n.State != api.NodeMaint || n.Reservation != "pm" || n.Reason != "Reserved for maintenance (pm)" {
		t.Errorf("node %s in an open maintenance window: %+v", on, n)
	}
	next, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1))})
	if err != nil {
		t.Fatal(err)
	}
	if j := waitJob(t, c, next.JobID, func(j api.Job) bool { return j.State == api.JobScheduled }); j.Containers[0].Node == on {
		t.Errorf("a new job was placed on %s, in maintenance", on)
	}
	l, err := c.Reservations(ctx)
	if err != nil || len(l.Reservations) != 1 || l.Reservations[0].State != api.ResvActive {
		t.Errorf("list: %+v, %v", l, err)
	}
}
