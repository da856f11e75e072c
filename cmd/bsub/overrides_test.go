package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/sched"
)

const rolesJob = `job "hello" {
  cluster {
    size = 3
  }
  image   = "host"
  command = ["hostname"]
  env     = { A = "1" }
  output  = "x-%j.out"
  role "sub" {
    command = ["sleep", "1"]
  }
}
`

func captureSubmit(t *testing.T) (*clitest.Schedd, *api.SubmitRequest) {
	s := clitest.NewSchedd(t)
	var got api.SubmitRequest
	s.Handle("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			clitest.Error(w, http.StatusBadRequest, err.Error())
			return
		}
		clitest.JSON(w, http.StatusOK, 5, api.SubmitResponse{JobID: 7, Partition: got.Spec.Partition})
	})
	return s, &got
}

func TestOverridesApplied(t *testing.T) {
	s, got := captureSubmit(t)
	code, out, errs := runBsub("--addr", s.Addr, "-q", "gpu", "-n", "4", "-J", "big", "-W", "1:30", "-o", "out-%J.%h",
		"-e", "err-%J.%h", "-A", "vision", "--env", "EPOCHS=20", "--env", "A=2", rolesJob2(t))
	if code != 0 || errs != "" || out != "Job <7> is submitted to partition <gpu>.\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	sp := got.Spec
	if sp.Partition != "gpu" || sp.Cluster.Size != 4 || sp.Name != "big" || sp.Walltime != 90*time.Minute ||
		sp.Output != "out-%j.%h" || sp.Error != "err-%j.%h" || sp.Account != "vision" || sp.Env["EPOCHS"] != "20" || sp.Env["A"] != "2" {
		t.Errorf("spec %+v", sp)
	}
	if len(sp.Roles) != 1 || sp.Roles[0].Replicas != 3 {
		t.Errorf("sub replicas did not follow -n: %+v", sp.Roles)
	}
	// Long names are the same flags.
	s, got = captureSubmit(t)
	if code, _, errs := runBsub("--addr", s.Addr, "--partition", "cpu", "--cluster-size", "2", "-P", "p1", rolesJob2(t)); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if got.Spec.Partition != "cpu" || got.Spec.Cluster.Size != 2 || got.Spec.Account != "p1" || got.Spec.Roles[0].Replicas != 1 {
		t.Errorf("spec %+v", got.Spec)
	}
}

func rolesJob2(t *testing.T) string { return writeJob(t, rolesJob) }

// TestArrayFlags: LSF's -J "name[range%N]" and Slurm's --array make a
// job file's job an array, over the file's own array block.
func TestArrayFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		name string
		want jobspec.Array
	}{
		{[]string{"-J", "sweep[1-100%10]"}, "sweep", jobspec.Array{Range: "1-100", MaxRunning: 10}},
		{[]string{"-J", "sweep[1-100]%10"}, "sweep", jobspec.Array{Range: "1-100", MaxRunning: 10}}, // as bsub(1) writes it
		{[]string{"-J", "sweep[1,3,5-9:2]"}, "sweep", jobspec.Array{Range: "1,3,5-9:2"}},
		{[]string{"--array", "1-100:2%10"}, "hello", jobspec.Array{Range: "1-99:2", MaxRunning: 10}},
	} {
		s, got := captureSubmit(t)
		code, out, errs := runBsub(append(append([]string{"--addr", s.Addr}, tc.args...), rolesJob2(t))...)
		if code != 0 || errs != "" || out != "Job <7> is submitted to partition <>.\n" {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q", tc.args, code, out, errs)
		}
		if got.Spec.Array == nil || jobspec.Array(*got.Spec.Array) != tc.want || got.Spec.Name != tc.name {
			t.Errorf("%q: name %q array %+v, want %q %+v", tc.args, got.Spec.Name, got.Spec.Array, tc.name, tc.want)
		}
	}
}

func TestOverrideErrorsNameTheFlag(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-n", "0"}, "bsub: -n 0: cluster size 0 is not valid; use 1 (main1 alone) to 253 containers, the most one session's network holds.\n"},
		{[]string{"-n", "5000"}, "bsub: -n 5000: cluster size 5000 is not valid; use 1 (main1 alone) to 253 containers, the most one session's network holds.\n"},
		{[]string{"-J", "bad name"}, `bsub: -J bad name: job name "bad name" is not valid; use 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit.` + "\n"},
		{[]string{"-W", "soon"}, "bsub: -W soon: want [HH:]MM, days-HH:MM:SS or a duration such as 2h, more than 0\n"},
		{[]string{"-W", "0"}, "bsub: -W 0: want [HH:]MM, days-HH:MM:SS or a duration such as 2h, more than 0\n"},
		{[]string{"-W", "0:00"}, "bsub: -W 0:00: want [HH:]MM, days-HH:MM:SS or a duration such as 2h, more than 0\n"},
		{[]string{"-o", "out-%y"}, `bsub: -o out-%y: output "out-%y" holds "%y", which is not a valid escape; use %j (job id), %h (container host), %u (user), %I or %a (array index), %A (array job id) or %% (a literal %).` + "\n"},
		{[]string{"-e", "e-%"}, `bsub: -e e-%: error "e-%" ends with a lone %; use %j (job id), %h (container host), %u (user), %I or %a (array index), %A (array job id) or %% (a literal %).` + "\n"},
		{[]string{"-J", "sweep[9-1]"}, `bsub: -J sweep[9-1]: array index term "9-1": the range runs backwards; want N, N-M or N-M:STEP with 0 ≤ N ≤ M ≤ 2147483646` + "\n"},
		{[]string{"--array", "1-5%0"}, "bsub: --array 1-5%0: array throttle %0: want a whole number of at least 1, the most elements running at once\n"},
		{[]string{"--env", "NOVALUE"}, "bsub: --env NOVALUE: want NAME=value\n"},
		{[]string{"--env", "BACKENDAI_X=1"}, "bsub: --env BACKENDAI_X=1: env BACKENDAI_X is set by troupe in every container; choose a name that does not start with BACKENDAI_.\n"},
		{[]string{"--env", "1X=1"}, `bsub: --env 1X=1: env "1X" is not a valid variable name; use letters, digits and _, not starting with a digit.` + "\n"},
	}
	for _, tt := range tests {
		s := clitest.NewSchedd(t)
		args := append(append([]string{"--addr", s.Addr}, tt.args...), writeJob(t, goodJob))
		code, out, errs := runBsub(args...)
		if code != 1 || out != "" || errs != tt.want {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q", tt.args, code, out, errs, tt.want)
		}
		if reqs := s.Requests(); len(reqs) != 0 {
			t.Errorf("%q: schedd was contacted: %q", tt.args, reqs)
		}
	}
}

// TestDryRunOlderSchedd: a schedd without POST /v1/jobs/check (405 or
// the mux's 404) gives no verdict, and bsub judges none of its own (no
// copy of schedd's rules here): the dry run says so and succeeds,
// having asked nothing else.
func TestDryRunOlderSchedd(t *testing.T) {
	s := clitest.NewSchedd(t)
	code, out, errs := runBsub("--addr", s.Addr, "--dry-run", "-q", "gpu", "-W", "5d", writeJob(t, goodJob))
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{"Job hello from ", "(dry run: nothing submitted)", "Partition: gpu", "Walltime:  5-00:00:00",
		"2 containers, single-node: main1,sub1", "Verdict: not checked (schedd at " + s.Addr + " has no POST /v1/jobs/check"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if reqs := s.Requests(); strings.Join(reqs, "|") != "POST /v1/jobs/check" {
		t.Errorf("requests %q: a dry run asks for the check alone", reqs)
	}
	// JSON: the request that would be sent, and no verdict.
	code, out, errs = runBsub("--addr", s.Addr, "--dry-run=json", "-q", "gpu", writeJob(t, goodJob))
	var dr cli.DryRun
	if code != 0 || json.Unmarshal([]byte(out), &dr) != nil || dr.Submit.Spec.Partition != "gpu" || dr.Verdict.Checked || dr.Verdict.Error == "" {
		t.Errorf("exit %d, stderr %q, stdout %s", code, errs, out)
	}
}

func TestDryRunWithoutSchedd(t *testing.T) {
	addr := clitest.Unreachable(t)
	code, out, errs := runBsub("--addr", addr, "--dry-run", writeJob(t, goodJob))
	if code != 0 || errs != "" || !strings.Contains(out, "Verdict: not checked (cannot reach schedd at "+addr) {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
}

// TestDryRunMatchesSubmitOnInputCap: against a real schedd, a job whose
// text is over max_job_input is refused by --dry-run (with the file's
// line) and by submit alike, naming the same setting; nothing is stored.
func TestDryRunMatchesSubmitOnInputCap(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := sched.Open(ctx, sched.Config{DataDir: t.TempDir(), MaxJobInput: 1024, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); cancel(); srv.Close() })
	small := strings.Replace(goodJob, `partition = "cpu"`, `partition = "default"`, 1)
	job := writeJob(t, strings.Replace(small, `command = ["hostname"]`,
		"command = [\"hostname\"]\n  env     = { DATA = \""+strings.Repeat("d", 2000)+"\" }", 1))
	code, _, errs := runBsub("--addr", hs.URL, "--dry-run", job)
	if code != 1 || !strings.Contains(errs, "job.hcl:12:15: Job too large") || !strings.Contains(errs, "env.DATA alone takes") {
		t.Fatalf("dry run: exit %d, stderr %q", code, errs)
	}
	code, _, errs = runBsub("--addr", hs.URL, job)
	if code == 0 || !strings.Contains(errs, "Job too large") || !strings.Contains(errs, "env.DATA alone takes") {
		t.Fatalf("submit: exit %d, stderr %q", code, errs)
	}
	if n := len(srv.Store().Snapshot().Jobs()); n != 0 {
		t.Fatalf("%d jobs stored", n)
	}
	// Within the cap both take it.
	if code, _, errs := runBsub("--addr", hs.URL, "--dry-run", writeJob(t, small)); code != 0 {
		t.Fatalf("dry run of a small job: exit %d, stderr %q", code, errs)
	}
}

// TestOverrideJobNameEscape: %x in -o and -e is the job's name, the
// file's label or -J's, as LSF's and Slurm's.
func TestOverrideJobNameEscape(t *testing.T) {
	for _, c := range []struct {
		args         []string
		output, errf string
	}{
		{[]string{"-o", "%x.%J.out", "-e", "%x.err"}, "hello.%j.out", "hello.err"},
		{[]string{"-J", "big", "-o", "out-%x-%%x"}, "out-big-%%x", ""},
	} {
		var (
			out, errb bytes.Buffer
			dr        struct{ Submit api.SubmitRequest }
		)
		args := append(append([]string{"--addr", clitest.Unreachable(t), "--dry-run=json"}, c.args...), writeJob(t, goodJob))
		code := run(args, strings.NewReader(""), &out, &errb)
		if err := json.Unmarshal(out.Bytes(), &dr); code != 0 || err != nil {
			t.Fatalf("%q: exit %d, %v, stderr %s", c.args, code, err, errb.String())
		}
		if s := dr.Submit.Spec; s.Output != c.output || s.Error != c.errf {
			t.Errorf("%q: output %q error %q; want %q %q", c.args, s.Output, s.Error, c.output, c.errf)
		}
	}
}

// TestDryRunRunsSubmitChecks (issue 14 item 6b): --dry-run asks schedd
// to run submit's own checks, node fit included: a single-node job of
// 2×3 cpus on two 4-cpu nodes is refused in submit's words, though the
// partition's 8 cpus would hold it (the partitions-only check passed
// it); a job that fits is taken; nothing is stored either way.
func TestDryRunRunsSubmitChecks(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := sched.Open(ctx, sched.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); cancel(); srv.Close() })
	c, err := client.New(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2"} {
		if _, err := c.Register(ctx, api.NodeRegister{Name: n, Addr: "127.0.0.1", Runtime: "process",
			Capacity: api.Resources{CPUMilli: 4000, Memory: 16 << 30}}); err != nil {
			t.Fatal(err)
		}
	}
	job := func(cpu int) string {
		src := strings.Replace(goodJob, `partition = "cpu"`, `partition = "default"`, 1)
		return writeJob(t, strings.Replace(src, "cpu    = 1", "cpu    = "+strconv.Itoa(cpu), 1))
	}
	big := job(3)
	code, out, errs := runBsub("--addr", hs.URL, "--dry-run", big)
	if code != 1 || !strings.Contains(errs, "schedd would refuse the job") || !strings.Contains(out, "refused: ") {
		t.Fatalf("2×3 cpus single-node on 4-cpu nodes: exit %d, stdout %s, stderr %q", code, out, errs)
	}
	_, submitErrs := runBsubErr(t, hs.URL, big)
	why := strings.TrimPrefix(strings.TrimSpace(submitErrs), "bsub: invalid request: ")
	if !strings.Contains(errs, why) {
		t.Errorf("dry run said %q, submit %q: want submit's words", errs, submitErrs)
	}
	code, out, errs = runBsub("--addr", hs.URL, "--dry-run", job(2))
	if code != 0 || errs != "" || !strings.Contains(out, "Verdict: schedd would take it into partition default") {
		t.Fatalf("2×2 cpus: exit %d, stdout %s, stderr %q", code, out, errs)
	}
	if n := len(srv.Store().Snapshot().Jobs()); n != 0 {
		t.Fatalf("%d jobs stored by dry runs and a refused submit", n)
	}
}

// runBsubErr submits path for real and returns the exit and stderr.
func runBsubErr(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	code, _, errs := runBsub("--addr", addr, path)
	if code == 0 {
		t.Fatalf("submit of %s was taken", path)
	}
	return code, errs
}

// TestCountWithSchedd: bsub --count with several files against a real
// schedd stores every copy of each, ids in the order of the lines, and a
// batch that breaks the queue limit stores none and says which job.
func TestCountWithSchedd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := sched.Open(ctx, sched.Config{DataDir: t.TempDir(), MaxQueuedPerUser: 8, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); cancel(); <-done; srv.Close() })
	small := strings.Replace(goodJob, `partition = "cpu"`, `partition = "default"`, 1)
	a := writeJob(t, small)
	b := writeJob(t, strings.Replace(small, `"hello"`, `"other"`, 1))

	code, out, errs := runBsub("--addr", hs.URL, "-H", "--count", "3", a, b)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines, want 6:\n%s", len(lines), out)
	}
	for i, l := range lines {
		var id uint64
		if _, err := fmt.Sscanf(l, "Job <%d> is submitted to partition <default>.", &id); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		j := srv.Store().Snapshot().Job(id)
		name := "hello"
		if i >= 3 {
			name = "other"
		}
		if j == nil || j.Name != name || j.State != api.JobHeld {
			t.Fatalf("line %d names job %d: %+v, want %s, held", i+1, id, j, name)
		}
	}

	// 6 held + 3 more is over max_queued_per_user 8: none of the three.
	code, out, errs = runBsub("--addr", hs.URL, "--count", "3", a)
	if code != 1 || out != "" || !strings.Contains(errs, "job 3 of 3") || !strings.Contains(errs, "max_queued_per_user 8") {
		t.Fatalf("over the limit: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if n := len(srv.Store().Snapshot().Jobs()); n != 6 {
		t.Fatalf("%d jobs stored, want 6", n)
	}
}
