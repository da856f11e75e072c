package accounting

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// benchRows is how many jobs BenchmarkQuery fills the store with
// (TROUPE_BENCH_ROWS, default a million: a year of a busy site).
func benchRows() int {
	if n, err := strconv.Atoi(os.Getenv("TROUPE_BENCH_ROWS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// fill puts n jobs of 50 users, 10 accounts and 4 partitions, ending
// over a year, in batches as the exporter writes them.
func fill(b *testing.B, s *Store, n int) {
	ctx := context.Background()
	states := []api.JobState{api.JobCompleted, api.JobCompleted, api.JobCompleted, api.JobFailed, api.JobCancelled, api.JobTimeout}
	step := 365 * 24 * time.Hour / time.Duration(n)
	began := time.Now()
	const batch = 2000
	for i := 0; i < n; i += batch {
		recs := make([]api.HistoryJob, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			h := rec(uint64(j+1), fmt.Sprintf("user%02d", j%50), fmt.Sprintf("acct%d", j%10), []string{"cpu", "gpu", "big", "debug"}[j%4],
				states[j%len(states)], t0.Add(time.Duration(j)*step))
			recs = append(recs, h)
		}
		if _, err := s.Put(ctx, recs); err != nil {
			b.Fatal(err)
		}
	}
	took := time.Since(began)
	b.Logf("filled %d rows in %v (%.0f rows/s)", n, took.Round(time.Millisecond), float64(n)/took.Seconds())
}

// BenchmarkQuery times bhist's and bacct's queries on a store of a
// million jobs (TROUPE_BENCH_ROWS). Run it with
//
//	go test -run XXX -bench Query -benchtime 20x ./accounting
func BenchmarkQuery(b *testing.B) {
	ctx := context.Background()
	n := benchRows()
	s, err := OpenSQLite(ctx, filepath.Join(b.TempDir(), FileName))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fill(b, s, n)
	end := t0.Add(365 * 24 * time.Hour)
	for _, c := range []struct {
		name string
		run  func() (int, error)
	}{
		{"bhist-user-last-100", func() (int, error) {
			r, err := s.Query(ctx, api.HistoryFilter{Users: []string{"user07"}, Limit: 100})
			return len(r), err
		}},
		{"bhist-user-one-day", func() (int, error) {
			r, err := s.Query(ctx, api.HistoryFilter{Users: []string{"user07"}, EndedFrom: end.Add(-48 * time.Hour), EndedTo: end.Add(-24 * time.Hour)})
			return len(r), err
		}},
		{"bhist-job-id", func() (int, error) {
			r, err := s.Query(ctx, api.HistoryFilter{IDs: []uint64{uint64(n / 2)}})
			return len(r), err
		}},
		{"bhist-all-failed-gpu-last-100", func() (int, error) {
			r, err := s.Query(ctx, api.HistoryFilter{Partitions: []string{"gpu"}, States: []api.JobState{api.JobFailed}, Limit: 100})
			return len(r), err
		}},
		{"bacct-by-user-one-month", func() (int, error) {
			r, err := s.Summary(ctx, api.HistoryFilter{EndedFrom: end.Add(-30 * 24 * time.Hour), EndedTo: end}, "user")
			return len(r), err
		}},
		{"bacct-one-user-year", func() (int, error) {
			r, err := s.Summary(ctx, api.HistoryFilter{Users: []string{"user07"}}, "account")
			return len(r), err
		}},
		{"bacct-by-account-whole-year", func() (int, error) {
			r, err := s.Summary(ctx, api.HistoryFilter{}, "account")
			return len(r), err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var got int
			for b.Loop() {
				var err error
				if got, err = c.run(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(got), "rows")
		})
	}
}
