package report

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
)

// recorder is a schedd that takes every report; block, when set, holds
// each send until the test receives from it.
type recorder struct {
	mu      sync.Mutex
	reports [][]api.ContainerUpdate
	got     chan struct{} // a report was taken
	block   chan struct{}
}

func newRecorder() *recorder { return &recorder{got: make(chan struct{}, 100)} }

func (r *recorder) send(ctx context.Context, rep api.ContainerReport) error {
	if r.block != nil {
		select {
		case <-r.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.Lock()
	r.reports = append(r.reports, slices.Clone(rep.Updates))
	r.mu.Unlock()
	r.got <- struct{}{}
	return nil
}

// wait returns the first n reports taken, failing after 10 s.
func (r *recorder) wait(t *testing.T, n int) [][]api.ContainerUpdate {
	t.Helper()
	for {
		r.mu.Lock()
		if len(r.reports) >= n {
			out := slices.Clone(r.reports[:n])
			r.mu.Unlock()
			return out
		}
		r.mu.Unlock()
		select {
		case <-r.got:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d reports taken after 10 s, want %d", len(r.reports), n)
		}
	}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reports)
}

// run starts q's delivery, stopped when the test ends.
func run(t *testing.T, q *Queue) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func newQueue(rec *recorder, hold time.Duration) *Queue {
	q := New(rec.send, slog.New(slog.NewTextHandler(io.Discard, nil)), false)
	q.hold = hold
	return q
}

// delivering is a queue holding preparing updates for hold, delivering
// to a new recorder until the test ends.
func delivering(t *testing.T, hold time.Duration) (*recorder, *Queue) {
	rec := newRecorder()
	q := newQueue(rec, hold)
	run(t, q)
	return rec, q
}

func upd(job uint64, host string, run int, st api.ContainerState) api.ContainerUpdate {
	return api.ContainerUpdate{JobID: job, Host: host, Requeues: run, State: st}
}

func states(us []api.ContainerUpdate) []string {
	var out []string
	for _, u := range us {
		out = append(out, u.Host+":"+string(u.State))
	}
	return out
}

// TestPreparingOvertaken: a container's running update that comes while
// its preparing update is held replaces it: one report, one raft entry.
// Another container's held preparing update, and one of an earlier run
// of the same container, are not its to replace.
func TestPreparingOvertaken(t *testing.T) {
	rec, q := delivering(t, time.Hour)
	q.Add(upd(1, "main1", 0, api.ContainerPreparing))
	q.Add(upd(2, "main1", 0, api.ContainerPreparing))
	q.Add(upd(3, "main1", 0, api.ContainerPreparing))
	q.Add(upd(1, "main1", 0, api.ContainerRunning))
	q.Add(upd(3, "main1", 1, api.ContainerRunning))
	got := rec.wait(t, 1)[0]
	want := []api.ContainerUpdate{
		upd(2, "main1", 0, api.ContainerPreparing), upd(3, "main1", 0, api.ContainerPreparing),
		upd(1, "main1", 0, api.ContainerRunning), upd(3, "main1", 1, api.ContainerRunning),
	}
	if !slices.Equal(got, want) {
		t.Errorf("report %+v, want %+v", got, want)
	}
}

// TestPreparingHeld: a preparing update alone waits out its hold, then
// goes out by itself.
func TestPreparingHeld(t *testing.T) {
	rec, q := delivering(t, time.Hour)
	q.Add(upd(1, "main1", 0, api.ContainerPreparing))
	time.Sleep(50 * time.Millisecond) // a window in which nothing may go out
	if n := rec.count(); n != 0 {
		t.Fatalf("%d reports sent during the hold, want none", n)
	}
	if n := q.Pending(); n != 1 {
		t.Fatalf("%d updates pending during the hold, want 1", n)
	}

	rec2, q2 := delivering(t, 20*time.Millisecond)
	q2.Add(upd(1, "main1", 0, api.ContainerPreparing))
	if got := rec2.wait(t, 1)[0]; !slices.Equal(got, []api.ContainerUpdate{upd(1, "main1", 0, api.ContainerPreparing)}) {
		t.Errorf("after the hold: report %+v, want the preparing update", got)
	}
}

// TestHeldRidesAlong: an update due at once takes the held ones with
// it, in the order they were queued.
func TestHeldRidesAlong(t *testing.T) {
	rec, q := delivering(t, time.Hour)
	q.Add(upd(1, "main1", 0, api.ContainerPreparing))
	q.Add(upd(2, "main1", 0, api.ContainerExited))
	got := rec.wait(t, 1)[0]
	if want := []string{"main1:preparing", "main1:exited"}; !slices.Equal(states(got), want) {
		t.Errorf("report %v, want %v", states(got), want)
	}
	if got[0].JobID != 1 || got[1].JobID != 2 {
		t.Errorf("report %+v, want job 1's preparing then job 2's exit", got)
	}
}

// TestPreparingInFlightKept: a preparing update already on its way to
// schedd is not taken back; the running update follows it in the next
// report.
func TestPreparingInFlightKept(t *testing.T) {
	rec, q := delivering(t, time.Hour)
	rec.block = make(chan struct{}) // before the first Add, which the send follows
	q.Add(upd(1, "main1", 0, api.ContainerPreparing))
	q.Add(upd(2, "main1", 0, api.ContainerExited)) // due: the flush takes both
	eventually.Equal(t, 10*time.Second, "the updates being sent", 2, func() int {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.sending
	})
	q.Add(upd(1, "main1", 0, api.ContainerRunning))
	close(rec.block)
	got := rec.wait(t, 2)
	if want := []string{"main1:preparing", "main1:exited"}; !slices.Equal(states(got[0]), want) {
		t.Errorf("first report %v, want %v", states(got[0]), want)
	}
	if want := []string{"main1:running"}; !slices.Equal(states(got[1]), want) {
		t.Errorf("second report %v, want %v", states(got[1]), want)
	}
}

// TestRetryKeepsHeld: a report schedd refuses is sent again whole, its
// held updates too, and nothing is dropped meanwhile.
func TestRetryKeepsHeld(t *testing.T) {
	var mu sync.Mutex
	var sent [][]api.ContainerUpdate
	refuse := 1
	got := make(chan struct{}, 10)
	q := New(func(_ context.Context, rep api.ContainerReport) error {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, slices.Clone(rep.Updates))
		if refuse > 0 {
			refuse--
			return errors.New("schedd is electing a leader")
		}
		got <- struct{}{}
		return nil
	}, slog.New(slog.NewTextHandler(io.Discard, nil)), false)
	q.hold = time.Hour
	run(t, q)
	q.Add(upd(1, "main1", 0, api.ContainerPreparing))
	q.Add(upd(2, "main1", 0, api.ContainerExited))
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no report taken after 10 s")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 2 || !slices.Equal(sent[0], sent[1]) || len(sent[1]) != 2 {
		t.Errorf("sent %+v, want the same two updates twice", sent)
	}
	if n := q.Pending(); n != 0 {
		t.Errorf("%d updates pending after the report was taken", n)
	}
}

// TestDrainSendsHeld: Drain, the nodelet's last delivery before it
// exits, does not wait for holds.
func TestDrainSendsHeld(t *testing.T) {
	rec := newRecorder()
	q := newQueue(rec, time.Hour)
	q.Add(upd(1, "main1", 0, api.ContainerPreparing))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rec.wait(t, 1)[0]; len(got) != 1 || got[0].State != api.ContainerPreparing {
		t.Errorf("drained %+v, want the held preparing update", got)
	}
}

// An update queued while schedd does not take reports keeps the time it
// carries (the container's end), and each try is stamped with the
// node's clock as it is sent, so that schedd can move that time onto
// its own.
func TestQueuedUpdateKeepsItsTime(t *testing.T) {
	var mu sync.Mutex
	var sent []api.ContainerReport
	refuse := true
	q := New(func(_ context.Context, rep api.ContainerReport) error {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, rep)
		if refuse {
			return errors.New("schedd away")
		}
		return nil
	}, slog.New(slog.NewTextHandler(io.Discard, nil)), false)
	ended := time.Now().Add(-time.Minute)
	q.Add(api.ContainerUpdate{JobID: 1, Host: "main1", State: api.ContainerExited, At: ended})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.flushOnce(ctx); err == nil {
		t.Fatal("a refused report was taken")
	}
	mu.Lock()
	refuse = false
	mu.Unlock()
	if err := q.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 2 {
		t.Fatalf("%d tries, want 2", len(sent))
	}
	for i, rep := range sent {
		if len(rep.Updates) != 1 || !rep.Updates[0].At.Equal(ended) || rep.Sent.IsZero() || rep.Sent.Before(ended) {
			t.Errorf("try %d: %+v; want the container's end kept and the try's time", i, rep)
		}
	}
	if sent[1].Sent.Before(sent[0].Sent) {
		t.Errorf("the retry was stamped %v, before the first try's %v", sent[1].Sent, sent[0].Sent)
	}
}
