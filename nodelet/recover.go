package nodelet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
	"github.com/troupe-hpc/troupe/nodelet/session"
)

// ErrDetach, as the cause of Run's context (context.WithCancelCause),
// stops the nodelet without stopping its containers: they keep running,
// and the next nodelet on the same state dir re-attaches to them
// (SIGQUIT to the nodelet; SIGTERM stops everything).
var ErrDetach = errors.New("nodelet detaching: containers keep running")

// detaching tells whether ctx ended with ErrDetach.
func detaching(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrDetach)
}

// canDetach tells whether containers outlive the nodelet (runc): other
// runtimes' containers are stopped even when detaching.
func (a *agent) canDetach() bool { return a.rt.Name() == RuntimeRunc }

// record is what the run dir keeps of a started container, so that a
// restarted nodelet can re-attach to it (records/<id>.json). Like its
// container, a record matters only until the node reboots, which ends
// every container and empties the run directory (a tmpfs), so it is
// made and removed there, at no cost of the disk's. A container whose
// record a reboot took before its exit reached schedd is reported lost
// by the next nodelet (reconcile); it is never started again.
type record struct {
	Job   api.AssignedJob `json:"job"` // as assigned when it started
	Host  string          `json:"host"`
	Run   int             `json:"run"` // the job's Requeues
	ID    string          `json:"id"`
	Dir   string          `json:"dir"`             // the runtime's Spec.Dir (bundle)
	NetNS string          `json:"netns,omitempty"` // pinned namespace, when on a session network
	// Signalled is the highest signal request Seq of the job handled for
	// this container (delivered, or not for it): a restarted nodelet
	// delivers only later ones.
	Signalled uint64 `json:"signalled,omitempty"`
	// Exit, once set, is the container's final report: its process
	// ended, the report was queued for schedd, and its teardown had
	// begun ("exited, reported, tearing down"). A restarted nodelet
	// reports it again (schedd drops a duplicate) and finishes the
	// teardown instead of re-attaching.
	Exit *api.ContainerUpdate `json:"exit,omitempty"`
	// CPUs are the cores the container holds (cpuset.go): a restarted
	// nodelet gives them to no other container while it runs.
	CPUs []int `json:"cpus,omitempty"`
}

func (a *recoverer) recordsDir() string { return filepath.Join(a.cfg.RunDir, "records") }

// legacyRecordsDir is where nodelets from before kept the records, in
// the state directory: readRecords moves them to recordsDir.
func (a *recoverer) legacyRecordsDir() string { return filepath.Join(a.cfg.StateDir, "records") }

func (a *recoverer) recordPath(id string) string { return filepath.Join(a.recordsDir(), id+".json") }

// writeRecord persists the record of a started container.
func (a *recoverer) writeRecord(t *task, spec runtime.Spec) error {
	// The runtime finds the exit status and terminal of the container
	// again from Dir, in directories of root's (see runtime.Recover).
	r := record{Job: t.job, Host: t.key.host, Run: t.key.run, ID: spec.ID, Dir: spec.Dir, NetNS: spec.NetNS,
		Signalled: lastSignal(t.job), CPUs: spec.CPUs}
	t.rec = &r
	return a.saveRecord(r)
}

// saveRecord writes r atomically (a temporary file renamed).
func (a *recoverer) saveRecord(r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(a.recordsDir(), 0o700); err != nil {
		return err
	}
	tmp := a.recordPath(r.ID) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, a.recordPath(r.ID))
}

// markTearingDown records that t's container exited with final report
// u, before u is reported: a nodelet that dies during the teardown
// leaves a record its successor finishes (recoverLeftovers). A container
// without a record (never written) has nothing to re-attach to anyway.
func (a *recoverer) markTearingDown(t *task, u api.ContainerUpdate) {
	if t.rec == nil {
		return
	}
	r := *t.rec
	r.Exit = &u
	t.rec = &r
	if err := a.saveRecord(r); err != nil {
		a.log.Warn("container record not marked exited: a restarted nodelet may report it lost", "id", r.ID, "err", err)
	}
}

func (a *recoverer) removeRecord(t *task) {
	if err := os.Remove(a.recordPath(t.id())); err != nil && !errors.Is(err, os.ErrNotExist) {
		a.log.Warn("removing container record", "err", err)
	}
}

// readRecords loads every record; unreadable ones are logged and dropped.
// Those a nodelet from before left in the state directory are moved to
// the run directory first (one there wins: it is the later).
func (a *recoverer) readRecords() []record {
	if legacy := a.legacyRecordsDir(); legacy != a.recordsDir() {
		for _, r := range a.readRecordsIn(legacy) {
			if _, err := os.Stat(a.recordPath(r.ID)); errors.Is(err, os.ErrNotExist) {
				if err := a.saveRecord(r); err != nil {
					a.log.Warn("container record not moved to the run directory", "id", r.ID, "err", err)
					continue
				}
			}
			_ = os.Remove(filepath.Join(legacy, r.ID+".json"))
		}
		_ = os.Remove(legacy) // once empty
	}
	return a.readRecordsIn(a.recordsDir())
}

func (a *recoverer) readRecordsIn(dir string) []record {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var rs []record
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		var r record
		b, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err != nil || !strings.HasSuffix(e.Name(), ".json") || r.ID+".json" != e.Name() {
			a.log.Warn("dropping unreadable container record", "file", p, "err", err)
			_ = os.Remove(p)
			continue
		}
		rs = append(rs, r)
	}
	return rs
}

// recovered is a container a previous nodelet started and this one
// re-attached to, or, when c is nil, one whose exit it had reported and
// whose teardown recoverLeftovers finished: its report is sent again.
type recovered struct {
	rec record
	c   runtime.Container
}

// recoverLeftovers re-attaches to the containers of the records the
// runtime still knows, then removes everything else a previous run left:
// the runtime's other containers, session links and namespaces of
// sessions with no re-attached container, bundles, files and records.
// A record marked exited (record.Exit) is a teardown the previous run
// began and did not finish: it is not re-attached to, so that removal
// finishes it, and it is returned for adopt to report again.
func (a *recoverer) recoverLeftovers(ctx context.Context) ([]recovered, error) {
	var (
		got  []recovered
		keep = map[string]bool{}
	)
	for _, r := range a.readRecords() {
		if r.Exit != nil {
			// Exited and reported, torn down only in part: what is left
			// (runtime container, cgroup, bundle, network, files) goes
			// with the other leftovers below, record included.
			a.log.Info("finishing the teardown of an exited container", "id", r.ID, "job", r.Job.ID, "host", r.Host, "run", r.Run)
			got = append(got, recovered{rec: r})
			continue
		}
		c, err := a.rt.Recover(ctx, r.ID, r.Dir)
		if err != nil {
			a.log.Info("not re-attaching to container", "id", r.ID, "job", r.Job.ID, "host", r.Host, "err", err)
			_ = os.Remove(a.recordPath(r.ID))
			continue
		}
		if a.net != nil && r.NetNS != "" {
			if err := a.net.Adopt(r.Job, r.Host, r.ID); err != nil {
				a.log.Warn("re-attached container's network not adopted", "id", r.ID, "err", err)
			}
		}
		if clash := a.cpus.hold(r.ID, r.CPUs); len(clash) > 0 {
			a.log.Warn("re-attached container's cores are another's too", "id", r.ID, "cpus", clash)
		}
		a.log.Info("re-attached to container", "id", r.ID, "job", r.Job.ID, "host", r.Host, "run", r.Run, "cpus", r.CPUs)
		keep[r.ID] = true
		got = append(got, recovered{rec: r, c: c})
	}
	if err := a.rt.Cleanup(ctx); err != nil {
		return got, fmt.Errorf("cleaning leftovers: %w", err)
	}
	if a.net != nil {
		if err := a.net.Cleanup(); err != nil {
			return got, fmt.Errorf("cleaning leftovers: %w", err)
		}
	}
	// A start cut short: unmounted, never RemoveAll (StateDir/pins: a
	// nodelet's from before RunDir).
	for _, d := range []string{a.pinsDir(), filepath.Join(a.cfg.StateDir, "pins")} {
		if err := unpin(d); err != nil {
			return got, fmt.Errorf("cleaning leftovers: %w", err)
		}
	}
	// The tools' copies too: a re-attached container keeps its links.
	for _, d := range append([]string{a.containersDir(), a.filesDir(), a.homesDir(), a.recordsDir(), a.toolsDir()}, a.legacyDirs()...) {
		ents, err := os.ReadDir(d)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return got, fmt.Errorf("cleaning leftovers: %w", err)
		}
		for _, e := range ents {
			if keep[strings.TrimSuffix(e.Name(), ".json")] {
				continue
			}
			if err := os.RemoveAll(filepath.Join(d, e.Name())); err != nil {
				return got, fmt.Errorf("cleaning leftovers: %w", err)
			}
		}
	}
	return got, nil
}

// adopt gives each re-attached container a task, as if this nodelet had
// started it; the first reconcile stops those schedd no longer wants.
func (a *recoverer) adopt(ctx context.Context, rs []recovered) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range rs {
		k := key{r.rec.Job.ID, r.rec.Host, r.rec.Run}
		if r.c == nil {
			a.finished[k] = true
			a.reports.sendLocked(&r.rec.Job, *r.rec.Exit)
			continue
		}
		held := false
		if c, err := session.Container(r.rec.Job, r.rec.Host); err == nil && fractional(c.GPUs) {
			held = true
			a.mps.adopt()
		}
		rec := r.rec
		a.launch.startTaskWith(ctx, k, r.rec.Job, r.c, held, &rec)
	}
}
