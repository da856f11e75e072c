package accounting

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func rec(id uint64, user, account, part string, state api.JobState, ended time.Time) api.HistoryJob {
	return api.HistoryJob{ID: id, User: user, Account: account, Partition: part, State: state,
		Submitted: ended.Add(-3 * time.Minute), Started: ended.Add(-2 * time.Minute), Ended: ended,
		Wait: time.Minute, Run: 2 * time.Minute, CPUTime: 90 * time.Second, GPUs: 2, Nodes: []string{"n1"},
		Containers: []api.HistoryContainer{{Host: "main1", Node: "n1", State: api.ContainerExited}}}
}

func openSQLite(t testing.TB) *Store {
	t.Helper()
	s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// drivers are the stores every behaviour test runs against: the same
// schema, migrations and queries.
var drivers = []struct {
	name string
	open func(testing.TB) *Store
}{{DriverSQLite, openSQLite}, {DriverPostgres, openPostgres}}

// eachDriver runs test against a fresh store of every driver.
func eachDriver(t *testing.T, test func(t *testing.T, s *Store)) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) { test(t, d.open(t)) })
	}
}

// TestPutIdempotent: exporting the same (id, run) twice stores it once,
// and a later run of the same job is a row of its own.
func TestPutIdempotent(t *testing.T) {
	eachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		batch := []api.HistoryJob{rec(1, "alice", "phys", "cpu", api.JobCompleted, t0), rec(2, "bob", "chem", "gpu", api.JobFailed, t0.Add(time.Minute))}
		if n, err := s.Put(ctx, batch); err != nil || n != 2 {
			t.Fatalf("first put: %d, %v", n, err)
		}
		again := append(batch, rec(3, "alice", "phys", "cpu", api.JobCompleted, t0.Add(2*time.Minute)))
		if n, err := s.Put(ctx, again); err != nil || n != 1 {
			t.Fatalf("re-export: %d new rows, %v; want 1 (job 3 only)", n, err)
		}
		rerun := rec(2, "bob", "chem", "gpu", api.JobCompleted, t0.Add(3*time.Minute))
		rerun.Requeues = 1
		if n, err := s.Put(ctx, []api.HistoryJob{rerun}); err != nil || n != 1 {
			t.Fatalf("job 2's second run: %d, %v", n, err)
		}
		if n, _ := s.Count(ctx); n != 4 {
			t.Fatalf("count %d, want 4", n)
		}
		got, err := s.Query(ctx, api.HistoryFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, h := range got {
			ids = append(ids, fmt.Sprintf("%d.%d", h.ID, h.Requeues))
		}
		if fmt.Sprint(ids) != "[1.0 2.0 3.0 2.1]" {
			t.Fatalf("order by end: %v", ids)
		}
		if got[0].Containers[0].Host != "main1" || got[0].Nodes[0] != "n1" {
			t.Fatalf("record lost its containers or nodes: %+v", got[0])
		}
	})
}

// TestPutConflict: a record under an (id, run) the store holds for
// another job (another submit) is refused loudly, with a ConflictError
// naming it, while the rest of the batch is stored; the same record
// again is no conflict. The store used to skip it in silence, and the
// new job's history was lost behind the old one's. MaxJobID sees ids
// and array ids.
func TestPutConflict(t *testing.T) {
	eachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if id, err := s.MaxJobID(ctx); err != nil || id != 0 {
			t.Fatalf("empty store's max job id: %d, %v", id, err)
		}
		old := rec(51, "alice", "phys", "cpu", api.JobCompleted, t0)
		if _, err := s.Put(ctx, []api.HistoryJob{old}); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Put(ctx, []api.HistoryJob{old}); err != nil || n != 0 {
			t.Fatalf("the same record again: %d, %v; want 0 new rows, no error", n, err)
		}
		other := rec(51, "bob", "chem", "gpu", api.JobFailed, t0.Add(time.Hour))
		n, err := s.Put(ctx, []api.HistoryJob{other, rec(52, "bob", "chem", "gpu", api.JobCompleted, t0)})
		var ce *ConflictError
		if !errors.Is(err, ErrConflict) || !errors.As(err, &ce) || len(ce.Keys) != 1 || ce.Keys[0] != (Key{ID: 51}) || n != 1 {
			t.Fatalf("another job under 51: %d new, %v; want 1 new and a conflict naming 51", n, err)
		}
		if !strings.Contains(err.Error(), "51 run 0 (stored: user alice") {
			t.Errorf("conflict message %q does not name the stored job", err)
		}
		got, err := s.Query(ctx, api.HistoryFilter{IDs: []uint64{51, 52}})
		if err != nil || len(got) != 2 || got[0].User != "alice" {
			t.Fatalf("after the conflict: %+v, %v; want alice's 51 and 52", got, err)
		}
		el := rec(60, "bob", "chem", "gpu", api.JobCompleted, t0)
		el.ArrayID, el.ArrayIndex = 70, 1
		if _, err := s.Put(ctx, []api.HistoryJob{el}); err != nil {
			t.Fatal(err)
		}
		if id, err := s.MaxJobID(ctx); err != nil || id != 70 {
			t.Fatalf("max job id: %d, %v; want 70 (an array's)", id, err)
		}
	})
}

// TestReopenKeepsRows: a committed batch survives closing and reopening
// (the migration runs once).
func TestReopenKeepsRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	s, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, []api.HistoryJob{rec(7, "alice", "", "cpu", api.JobCompleted, t0)}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, _ := s.Count(ctx); n != 1 {
		t.Fatalf("after reopen %d rows, want 1", n)
	}
}

func TestFilters(t *testing.T) {
	eachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		recs := []api.HistoryJob{
			rec(1, "alice", "phys", "cpu", api.JobCompleted, t0),
			rec(2, "bob", "chem", "gpu", api.JobFailed, t0.Add(time.Hour)),
			rec(3, "alice", "phys", "gpu", api.JobTimeout, t0.Add(2*time.Hour)),
			rec(4, "carol", "chem", "cpu", api.JobCancelled, t0.Add(3*time.Hour)),
		}
		if _, err := s.Put(ctx, recs); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			f    api.HistoryFilter
			want string
		}{
			{"all", api.HistoryFilter{}, "[1 2 3 4]"},
			{"user", api.HistoryFilter{Users: []string{"alice"}}, "[1 3]"},
			{"account", api.HistoryFilter{Accounts: []string{"chem"}}, "[2 4]"},
			{"partition", api.HistoryFilter{Partitions: []string{"gpu"}}, "[2 3]"},
			{"state", api.HistoryFilter{States: []api.JobState{api.JobFailed, api.JobTimeout}}, "[2 3]"},
			{"ended range", api.HistoryFilter{EndedFrom: t0.Add(time.Hour), EndedTo: t0.Add(2 * time.Hour)}, "[2 3]"},
			{"submitted from", api.HistoryFilter{SubmittedFrom: t0.Add(2 * time.Hour)}, "[4]"},
			{"ids", api.HistoryFilter{IDs: []uint64{4, 1}}, "[1 4]"},
			{"limit keeps the last", api.HistoryFilter{Limit: 2}, "[3 4]"},
			{"combined", api.HistoryFilter{Users: []string{"alice"}, Partitions: []string{"cpu"}}, "[1]"},
		} {
			t.Run(c.name, func(t *testing.T) {
				got, err := s.Query(ctx, c.f)
				if err != nil {
					t.Fatal(err)
				}
				var ids []uint64
				for _, h := range got {
					ids = append(ids, h.ID)
					if !c.f.Match(&h) && c.f.Limit == 0 {
						t.Errorf("Match disagrees with the query on job %d", h.ID)
					}
				}
				if fmt.Sprint(ids) != c.want {
					t.Fatalf("got %v, want %s", ids, c.want)
				}
			})
		}
	})
}

func TestSummary(t *testing.T) {
	eachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		recs := []api.HistoryJob{
			rec(1, "alice", "phys", "cpu", api.JobCompleted, t0),
			rec(2, "bob", "chem", "gpu", api.JobFailed, t0.Add(time.Hour)),
			rec(3, "alice", "phys", "gpu", api.JobTimeout, t0.Add(2*time.Hour)),
		}
		if _, err := s.Put(ctx, recs); err != nil {
			t.Fatal(err)
		}
		rows, err := s.Summary(ctx, api.HistoryFilter{}, "user")
		if err != nil {
			t.Fatal(err)
		}
		want := api.AccountingRow{Group: "alice", Jobs: 2, Completed: 1, Failed: 1, Wait: 2 * time.Minute, Run: 4 * time.Minute,
			CPUTime: 3 * time.Minute, GPUHours: 2 * 2 * (2.0 / 60)}
		if len(rows) != 2 || rows[0].Group != "alice" || rows[0].Jobs != want.Jobs || rows[0].Completed != 1 || rows[0].Failed != 1 ||
			rows[0].Run != want.Run || rows[0].CPUTime != want.CPUTime || fmt.Sprintf("%.4f", rows[0].GPUHours) != fmt.Sprintf("%.4f", want.GPUHours) {
			t.Fatalf("summary %+v, want first %+v", rows, want)
		}
		var byHand api.AccountingRow
		for i := range recs {
			if recs[i].User == "alice" {
				Add(&byHand, &recs[i])
			}
		}
		byHand.Group = "alice"
		if fmt.Sprintf("%+v", byHand) != fmt.Sprintf("%+v", rows[0]) {
			t.Fatalf("Add %+v differs from SQL %+v", byHand, rows[0])
		}
		if rows, _ := s.Summary(ctx, api.HistoryFilter{EndedFrom: t0.Add(30 * time.Minute)}, "partition"); len(rows) != 1 || rows[0].Group != "gpu" || rows[0].Jobs != 2 {
			t.Fatalf("by partition since: %+v", rows)
		}
		if _, err := s.Summary(ctx, api.HistoryFilter{}, "node"); err == nil {
			t.Fatal("group by node accepted")
		}
	})
}

// TestExpire: retention deletes the rows that ended before the cutoff.
func TestExpire(t *testing.T) {
	eachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if _, err := s.Put(ctx, []api.HistoryJob{rec(1, "a", "", "cpu", api.JobCompleted, t0), rec(2, "a", "", "cpu", api.JobCompleted, t0.Add(48*time.Hour))}); err != nil {
			t.Fatal(err)
		}
		n, err := s.Expire(ctx, t0.Add(24*time.Hour))
		if err != nil || n != 1 {
			t.Fatalf("expired %d, %v; want 1", n, err)
		}
		got, _ := s.Query(ctx, api.HistoryFilter{})
		if len(got) != 1 || got[0].ID != 2 {
			t.Fatalf("left %+v, want job 2", got)
		}
	})
}

// TestArrayElements: each element of a job array is stored as a job of
// its own with its array's id and index; the array's id picks all its
// elements, an element's own id that one.
func TestArrayElements(t *testing.T) {
	eachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		var batch []api.HistoryJob
		for i, idx := range []int{1, 3, 5} {
			r := rec(uint64(11+i), "alice", "phys", "cpu", api.JobCompleted, t0.Add(time.Duration(i)*time.Minute))
			r.ArrayID, r.ArrayIndex = 10, idx
			batch = append(batch, r)
		}
		batch = append(batch, rec(20, "alice", "phys", "cpu", api.JobCompleted, t0))
		if _, err := s.Put(ctx, batch); err != nil {
			t.Fatal(err)
		}
		got, err := s.Query(ctx, api.HistoryFilter{IDs: []uint64{10}})
		if err != nil {
			t.Fatal(err)
		}
		var refs []string
		for _, h := range got {
			refs = append(refs, h.Ref())
		}
		slices.Sort(refs)
		if strings.Join(refs, " ") != "10[1] 10[3] 10[5]" {
			t.Fatalf("array 10's records: %v", refs)
		}
		if got, _ := s.Query(ctx, api.HistoryFilter{IDs: []uint64{12}}); len(got) != 1 || got[0].Ref() != "10[3]" {
			t.Fatalf("element 12: %+v", got)
		}
		f := api.HistoryFilter{IDs: []uint64{10}}
		if !f.Match(&batch[0]) || f.Match(&batch[3]) {
			t.Fatal("Match disagrees with the store on array ids")
		}
	})
}

// TestFilesPrivate: the store's files (the database, its -wal and -shm)
// are FileMode whatever the umask, whether the database is new or was
// left readable by an older schedd: another local user reads none of
// the records, the reasons the API withholds included.
func TestFilesPrivate(t *testing.T) {
	old := syscall.Umask(0) // the most permissive umask a site may run with
	defer syscall.Umask(old)
	ctx := context.Background()
	for _, pre := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), FileName)
		if pre {
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s, err := OpenSQLite(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Put(ctx, []api.HistoryJob{rec(7, "alice", "", "cpu", api.JobFailed, t0)}); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(f)
			if err != nil {
				t.Fatalf("after a write (existing file %v): %v", pre, err)
			}
			if m := fi.Mode().Perm(); m != FileMode {
				t.Errorf("%s is %v (existing file %v), want %v", filepath.Base(f), m, pre, FileMode)
			}
		}
		s.Close()
	}
}

// TestOneElement: a filter on one element (12[5], bhist -l '12[5]')
// answers exactly what the array's records filtered here by index hold,
// read by the array index (the query plan names it), alone or with
// other ids; Match agrees. Each yields the records in order and stops
// at its callback's error, and Limit keeps the last ones by end.
func TestOneElement(t *testing.T) {
	eachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		var batch []api.HistoryJob
		for i := range 200 {
			r := rec(uint64(101+i), "alice", "phys", "cpu", api.JobCompleted, t0.Add(time.Duration(i%7)*time.Minute))
			r.ArrayID, r.ArrayIndex = 100, i+1
			batch = append(batch, r)
		}
		batch = append(batch, rec(400, "bob", "phys", "cpu", api.JobFailed, t0))
		if _, err := s.Put(ctx, batch); err != nil {
			t.Fatal(err)
		}
		all, err := s.Query(ctx, api.HistoryFilter{IDs: []uint64{100}})
		if err != nil || len(all) != 200 {
			t.Fatalf("array 100: %d records, %v", len(all), err)
		}
		for _, idx := range []int{1, 77, 200, 201} {
			f := api.HistoryFilter{Elements: []api.JobRef{{ID: 100, Index: idx, Element: true}}}
			got, err := s.Query(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var want []api.HistoryJob
			for i := range all {
				if all[i].ArrayIndex == idx {
					want = append(want, all[i])
				}
				if m := f.Match(&all[i]); m != (all[i].ArrayIndex == idx) {
					t.Errorf("Match(%s) = %v for element %d", all[i].Ref(), m, idx)
				}
			}
			if len(got) != len(want) || (len(want) == 1 && got[0].Ref() != want[0].Ref()) {
				t.Errorf("element 100[%d]: %v, want %v", idx, got, want)
			}
		}
		got, err := s.Query(ctx, api.HistoryFilter{IDs: []uint64{400}, Elements: []api.JobRef{{ID: 100, Index: 9, Element: true}}})
		if err != nil || len(got) != 2 {
			t.Fatalf("400 and 100[9]: %v, %v", got, err)
		}
		if s.Driver() == DriverSQLite {
			w, args := where(&api.HistoryFilter{Elements: []api.JobRef{{ID: 100, Index: 9, Element: true}}})
			var plan strings.Builder
			rows, err := s.db.QueryContext(ctx, "EXPLAIN QUERY PLAN SELECT id FROM jobs"+w, args...)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan.WriteString(detail + "; ")
			}
			rows.Close()
			if !strings.Contains(plan.String(), "jobs_array") {
				t.Errorf("one element's query does not use the array index: %s", plan.String())
			}
		}
		// Each: every record in order, over pages of 7 (ties of end
		// across pages too), the last Limit, and a stop.
		defer func(n int) { eachPage = n }(eachPage)
		eachPage = 7
		var prev api.HistoryJob
		n := 0
		if err := s.Each(ctx, api.HistoryFilter{}, func(h api.HistoryJob) error {
			if n > 0 && (h.Ended.Before(prev.Ended) || h.Ended.Equal(prev.Ended) && h.ID < prev.ID) {
				t.Errorf("%s after %s: not in order of end and id", h.Ref(), prev.Ref())
			}
			prev, n = h, n+1
			return nil
		}); err != nil || n != 201 {
			t.Fatalf("Each: %d records, %v", n, err)
		}
		paged, err := s.Query(ctx, api.HistoryFilter{IDs: []uint64{100}})
		if err != nil || mustJSON(t, paged) != mustJSON(t, all) {
			t.Fatalf("array 100 read over pages of 7: %d records (%v), want the %d of one page", len(paged), err, len(all))
		}
		last, err := s.Query(ctx, api.HistoryFilter{Limit: 5})
		if err != nil || len(last) != 5 {
			t.Fatalf("last 5: %v, %v", last, err)
		}
		for i, h := range last {
			if w := all[len(all)-5+i]; h.ID != w.ID {
				t.Errorf("last 5: #%d is %s, want %s", i, h.Ref(), w.Ref())
			}
		}
		stop := errors.New("enough")
		n = 0
		if err := s.Each(ctx, api.HistoryFilter{}, func(api.HistoryJob) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
			t.Fatalf("Each stopped by its callback: %d records, %v", n, err)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
