package cli

import (
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// WriteAccounting writes bacct's table: one row per group, then the
// total.
func WriteAccounting(w io.Writer, a api.Accounting) error {
	t := NewTable(w, strings.ToUpper(a.GroupBy), "JOBS", "DONE", "FAILED", "AVG_WAIT", "AVG_RUN", "RUN_TIME", "CPU_TIME", "GPU_HOURS")
	row := func(name string, r api.AccountingRow) {
		t.Row(name, strconv.FormatInt(r.Jobs, 10), strconv.FormatInt(r.Completed, 10), strconv.FormatInt(r.Failed, 10),
			Elapsed(avg(r.Wait, r.Jobs)), Elapsed(avg(r.Run, r.Jobs)), Elapsed(r.Run), CPUTime(r.CPUTime),
			strconv.FormatFloat(r.GPUHours, 'f', 2, 64))
	}
	for _, r := range a.Rows {
		name := r.Group
		if name == "" {
			name = "-"
		}
		row(name, r)
	}
	if len(a.Rows) > 1 {
		row("TOTAL", a.Total)
	}
	return t.Flush()
}

func avg(d time.Duration, n int64) time.Duration {
	if n == 0 {
		return 0
	}
	return d / time.Duration(n)
}
