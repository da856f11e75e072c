package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

// The startup benchmarks run the built bsub as users do, one process per
// submission, and report the median and 90th percentile wall time of
// one run besides the mean. bsub is built as the Makefile builds it;
// BSUB_BENCH_BIN names a binary to measure instead (an older build, to
// compare):
//
//	go test -run '^$' -bench Startup -benchtime 200x ./cmd/bsub
var builtBsub = sync.OnceValues(func() (string, error) {
	if bin := os.Getenv("BSUB_BENCH_BIN"); bin != "" {
		return bin, nil
	}
	dir, err := os.MkdirTemp("", "bsub-bench")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "bsub")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stderr = os.Stderr
	return bin, cmd.Run()
})

func bsubBinary(b *testing.B) string {
	b.Helper()
	if _, err := exec.LookPath("go"); err != nil && os.Getenv("BSUB_BENCH_BIN") == "" {
		b.Skip("no go command to build bsub with, and no BSUB_BENCH_BIN")
	}
	bin, err := builtBsub()
	if err != nil {
		b.Fatalf("building bsub: %v", err)
	}
	return bin
}

// benchExec runs bin with args b.N times and reports the percentiles.
func benchExec(b *testing.B, bin string, args ...string) {
	b.Helper()
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		out, err := exec.Command(bin, args...).CombinedOutput()
		times = append(times, time.Since(start))
		if err != nil {
			b.Fatalf("%s %v: %v\n%s", bin, args, err, out)
		}
	}
	b.StopTimer()
	slices.Sort(times)
	at := func(q float64) float64 {
		return float64(times[int(q*float64(len(times)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.9), "p90-ms")
}

// BenchmarkStartupHelp is the cost of starting bsub at all.
func BenchmarkStartupHelp(b *testing.B) {
	benchExec(b, bsubBinary(b), "--help")
}

// BenchmarkStartupSubmit is one `bsub job.hcl` against a schedd that
// answers at once: parse, validate, one POST, the line.
func BenchmarkStartupSubmit(b *testing.B) {
	bin := bsubBinary(b)
	s := clitest.NewSchedd(b)
	s.Handle("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		var req api.SubmitRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			clitest.Error(w, http.StatusBadRequest, err.Error())
			return
		}
		clitest.JSON(w, http.StatusOK, 5, api.SubmitResponse{JobID: 7, Partition: "cpu"})
	})
	path := filepath.Join(b.TempDir(), "job.hcl")
	if err := os.WriteFile(path, []byte(goodJob), 0o644); err != nil {
		b.Fatal(err)
	}
	benchExec(b, bin, "--addr", s.Addr, path)
}

// TestOneP: bsub runs on one P, unless GOMAXPROCS in the environment
// sets the number.
func TestOneP(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	runtime.GOMAXPROCS(2)
	t.Setenv("GOMAXPROCS", "")
	oneP()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("GOMAXPROCS unset: %d Ps, want 1", n)
	}
	runtime.GOMAXPROCS(2)
	t.Setenv("GOMAXPROCS", "2")
	oneP()
	if n := runtime.GOMAXPROCS(0); n != 2 {
		t.Errorf("GOMAXPROCS=2 in the environment: %d Ps, want 2", n)
	}
}
