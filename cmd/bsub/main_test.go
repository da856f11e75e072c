package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

const goodJob = `job "hello" {
  partition = "cpu"
  cluster {
    size = 2
  }
  resources {
    cpu    = 1
    memory = "1GiB"
  }
  image   = "host"
  command = ["hostname"]
}
`

func writeJob(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func runBsub(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestSubmit(t *testing.T) {
	s := clitest.NewSchedd(t)
	var got api.SubmitRequest
	s.Handle("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			clitest.Error(w, http.StatusBadRequest, err.Error())
			return
		}
		clitest.JSON(w, http.StatusOK, 5, api.SubmitResponse{JobID: 7, Partition: "cpu"})
	})
	path := writeJob(t, goodJob)
	code, out, errs := runBsub("--addr", s.Addr, path)
	if code != 0 || out != "Job <7> is submitted to partition <cpu>.\n" || errs != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	cwd, _ := os.Getwd()
	if got.Spec.Name != "hello" || got.Source != path || got.Cwd != cwd || got.UID != os.Getuid() || got.GID != os.Getgid() || got.User == "" || got.Hold {
		t.Errorf("request %+v", got)
	}

	// -H submits it held; the answer is the usual line.
	for _, flag := range []string{"-H", "--hold"} {
		got = api.SubmitRequest{}
		code, out, errs = runBsub(flag, "--addr", s.Addr, path)
		if code != 0 || out != "Job <7> is submitted to partition <cpu>.\n" || errs != "" || !got.Hold {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q, hold %v", flag, code, out, errs, got.Hold)
		}
	}

	// -w (--dependency) sends the normalized dependency, from either syntax.
	for _, args := range [][]string{{"-w", "done(3) && ended(4)"}, {"--dependency", "afterok:3,afterany:4"}} {
		got = api.SubmitRequest{}
		code, _, errs = runBsub(append(args, "--addr", s.Addr, path)...)
		if code != 0 || errs != "" || got.DependsOn.String() != "done(3) && ended(4)" {
			t.Fatalf("%v: exit %d, stderr %q, dependency %v", args, code, errs, got.DependsOn)
		}
	}
}

func TestRefused(t *testing.T) {
	s := clitest.NewSchedd(t)
	s.Handle("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		clitest.Error(w, http.StatusUnprocessableEntity, "cluster size 64 can never fit partition cpu (largest node: 16 containers)")
	})
	code, out, errs := runBsub("--addr", s.Addr, writeJob(t, goodJob))
	if code != 1 || out != "" || errs != "bsub: cluster size 64 can never fit partition cpu (largest node: 16 containers)\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestBrokenJobFileSubmitsNothing(t *testing.T) {
	s := clitest.NewSchedd(t)
	path := writeJob(t, "job \"x\" {\n  cluster {\n    size = = 2\n  }\n}\n")
	code, out, errs := runBsub("--addr", s.Addr, path)
	if code != 1 || out != "" {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	if !regexp.MustCompile(regexp.QuoteMeta(path) + `:3:\d+: `).MatchString(errs) {
		t.Errorf("stderr names no %s:3:col:\n%s", path, errs)
	}
	if reqs := s.Requests(); len(reqs) != 0 {
		t.Errorf("schedd was contacted: %q", reqs)
	}
}

func TestMissingJobFile(t *testing.T) {
	code, out, errs := runBsub("--addr", clitest.Unreachable(t), filepath.Join(t.TempDir(), "nope.hcl"))
	if code != 1 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "nope.hcl") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestUnreachable(t *testing.T) {
	addr := clitest.Unreachable(t)
	code, out, errs := runBsub("--addr", addr, writeJob(t, goodJob))
	want := "bsub: cannot reach schedd at " + addr + ": connect: no such file or directory\n"
	if code != 1 || out != "" || errs != want {
		t.Errorf("exit %d, stdout %q, stderr %q, want %q", code, out, errs, want)
	}
}

func TestArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		errs string // first line of stderr
	}{
		{"no file", nil, 2, "bsub: missing job file, script or command (and stdin is empty)"},
		{"count zero", []string{"--count", "0", "a.hcl"}, 2, "bsub: --count 0: want 1 to 100000"},
		{"count and wait", []string{"--count", "3", "-K", "a.hcl"}, 2, "bsub: --wait waits for one job, not 3: submit them, then follow them with bjobs"},
		{"two files and wait", []string{"-K", "a.hcl", "b.hcl"}, 2, "bsub: --wait waits for one job, not 2: submit them, then follow them with bjobs"},
		{"count and dry run", []string{"--count", "2", "--dry-run", "a.hcl"}, 2, "bsub: --dry-run checks one job, not 2: check each file on its own"},
		{"count and -I", []string{"--count", "2", "-I", "a.hcl"}, 2, "bsub: -I runs one job on this terminal: drop --count"},
		{"unknown flag", []string{"-Z", "normal", "a.hcl"}, 2, "bsub: flag provided but not defined: -Z"},
		{"script option on a job file", []string{"-R", "span[hosts=1]", "a.hcl"}, 2, "bsub: -R: for scripts and command lines; a job file says this itself (see troupe-job(5))"},
		{"-e without a file", []string{"a.hcl", "-e"}, 2, "bsub: flag needs an argument: -e"},
		{"dry run and wait", []string{"--dry-run", "-K", "a.hcl"}, 2, "bsub: --dry-run submits nothing for --wait to wait for"},
		{"bad dependency", []string{"-w", "done(3", "a.hcl"}, 2, `bsub: -w: dependency term "done(3": want condition(jobid), e.g. done(12)`},
		{"mixed dependency", []string{"-w", "afterok:1,afterany:2?after:3", "a.hcl"}, 2, `bsub: -w: dependency "afterok:1,afterany:2?after:3" mixes ',' and '?': join all terms with one of them`},
		{"bad dry-run value", []string{"--dry-run=xml", "a.hcl"}, 2, `bsub: invalid boolean value "xml" for -dry-run: want --dry-run or --dry-run=json`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runBsub(tt.args...)
			lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
			if code != tt.code || out != "" || lines[0] != tt.errs || len(lines) != 2 || lines[1] != "Run 'bsub -h' for usage." {
				t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	code, out, errs := runBsub("-h")
	if code != 0 || errs != "" || !strings.Contains(out, "Usage: bsub [flags] JOBFILE") || !strings.Contains(out, "--wait, -K") || !strings.Contains(out, "bsub train.hcl") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
}

// waitSchedd accepts one job and then serves states in turn, one per
// blocking query.
func waitSchedd(t *testing.T, states ...api.Job) *clitest.Schedd {
	s := clitest.NewSchedd(t)
	s.Handle("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 1, api.SubmitResponse{JobID: 7, Partition: "gpu"})
	})
	var n atomic.Int64
	s.Handle("GET /v1/jobs/7", func(w http.ResponseWriter, r *http.Request) {
		i := min(int(n.Add(1))-1, len(states)-1)
		j := states[i]
		j.ID = 7
		clitest.JSON(w, http.StatusOK, uint64(10+i), j)
	})
	return s
}

func TestWaitExitStatus(t *testing.T) {
	pending := api.Job{State: api.JobPending, Reason: api.ReasonResources}
	running := api.Job{State: api.JobRunning}
	tests := []struct {
		name string
		end  api.Job
		code int
		errs string
	}{
		{"completed", api.Job{State: api.JobCompleted}, 0, ""},
		{"failed", api.Job{State: api.JobFailed, ExitCode: 3}, 3, "bsub: job 7 FAILED with exit code 3\n"},
		{"failed without code", api.Job{State: api.JobFailed}, 1, "bsub: job 7 FAILED with exit code 0\n"},
		{"failed code out of range", api.Job{State: api.JobFailed, ExitCode: 256}, 1, "bsub: job 7 FAILED with exit code 256\n"},
		{"cancelled", api.Job{State: api.JobCancelled, Reason: "cancelled by alice"}, 1, "bsub: job 7 CANCELLED (cancelled by alice)\n"},
		{"timeout", api.Job{State: api.JobTimeout}, 1, "bsub: job 7 TIMEOUT\n"},
		{"node fail", api.Job{State: api.JobNodeFail}, 1, "bsub: job 7 NODE_FAIL\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := waitSchedd(t, pending, running, tt.end)
			for _, flag := range []string{"--wait", "-K"} {
				code, out, errs := runBsub(flag, "--addr", s.Addr, writeJob(t, goodJob))
				if code != tt.code || out != "Job <7> is submitted to partition <gpu>.\n" || errs != tt.errs {
					t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, stderr %q", flag, code, out, errs, tt.code, tt.errs)
				}
			}
		})
	}
}

func TestWaitUsesBlockingQueries(t *testing.T) {
	s := waitSchedd(t, api.Job{State: api.JobPending}, api.Job{State: api.JobRunning}, api.Job{State: api.JobCompleted})
	if code, _, errs := runBsub("-K", "--addr", s.Addr, writeJob(t, goodJob)); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := []string{"POST /v1/jobs", "GET /v1/jobs/7", "GET /v1/jobs/7?index=10&wait=30s", "GET /v1/jobs/7?index=11&wait=30s"}
	if got := s.Requests(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("requests %q, want %q", got, want)
	}
}

func TestStatusLine(t *testing.T) {
	var b bytes.Buffer
	s := &statusLine{w: &b, tty: true, id: 7}
	s.show("PENDING (Resources)")
	s.show("PENDING (Resources)")
	s.show("RUNNING")
	s.done()
	want := "\rJob 7: PENDING (Resources)\x1b[K\rJob 7: PENDING (Resources) → RUNNING\x1b[K\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	b.Reset()
	s = &statusLine{w: &b, tty: false, id: 7}
	s.show("RUNNING")
	s.done()
	if b.Len() != 0 {
		t.Errorf("off a terminal: %q", b.String())
	}
}

func TestVarFlag(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "v.hcl")
	src := "variable \"n\" {}\njob \"v\" {\n  image = \"host\"\n  command = [\"echo\", var.n]\n}\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	// Without -var the job file is incomplete: diagnostics, exit 1.
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--addr", "unix:///nonexistent.sock", path}, nil, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "v.hcl:1:") {
		t.Fatalf("without -var: exit %d, stderr %q", code, stderr.String())
	}
	// With it the file parses and bsub goes on to contact schedd.
	stdout.Reset()
	stderr.Reset()
	code := run([]string{"--addr", "unix:///nonexistent.sock", "-var", "n=hi", path}, nil, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "cannot reach schedd at unix:///nonexistent.sock") {
		t.Fatalf("with -var: exit %d, stderr %q", code, stderr.String())
	}
	if code := run([]string{"-var", "novalue", path}, nil, &stdout, &stderr); code != 2 {
		t.Fatalf("-var without =: exit %d, want 2", code)
	}
}

// TestWaitOnStaleFollower (issue 21 item 5): a peer that has not applied
// the just-acknowledged job yet answers 404; bsub --wait asks the next
// peer instead of printing "not found" for its own job.
func TestWaitOnStaleFollower(t *testing.T) {
	stale := clitest.NewSchedd(t)
	stale.Handle("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 1, api.SubmitResponse{JobID: 7, Partition: "gpu"})
	})
	stale.Handle("GET /v1/jobs/7", func(w http.ResponseWriter, r *http.Request) {
		clitest.Error(w, http.StatusNotFound, "job 7: not found")
	})
	leader := waitSchedd(t, api.Job{State: api.JobRunning}, api.Job{State: api.JobCompleted})
	old := retryDelay
	retryDelay = 10 * time.Millisecond
	t.Cleanup(func() { retryDelay = old })
	code, out, errs := runBsub("-K", "--addr", stale.Addr+","+leader.Addr, writeJob(t, goodJob))
	if code != 0 || out != "Job <7> is submitted to partition <gpu>.\n" || errs != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestSubmitOutcomeUnknown: when schedd cannot tell whether the job was
// stored and no retry settles it, bsub says so and how to check, and
// never advises to retry.
func TestSubmitOutcomeUnknown(t *testing.T) {
	s := clitest.NewSchedd(t)
	var ids []string
	s.Handle("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		ids = append(ids, r.Header.Get(api.RequestHeader))
		w.Header().Set(api.OutcomeHeader, api.OutcomeUnknown)
		clitest.Error(w, http.StatusGatewayTimeout, "outcome unknown: leadership lost while committing log")
	})
	code, out, errs := runBsub("--timeout", "1s", "--addr", s.Addr, writeJob(t, goodJob))
	last := errs[strings.LastIndex(strings.TrimSuffix(errs, "\n"), "\n")+1:]
	if code != 1 || out != "" || !strings.Contains(last, "may or may not have been submitted") || !strings.Contains(last, "bqueue") || strings.HasSuffix(last, "retry\n") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if len(ids) < 2 || ids[0] != ids[len(ids)-1] {
		t.Fatalf("request ids %q: want several tries with one id", ids)
	}
	if !strings.Contains(errs, "sending it again with the same request id") {
		t.Fatalf("stderr %q: want a line saying it sends the request again", errs)
	}
}

// TestWaitOnLoneStaleFollower (issue 14 item 6a): through the one peer
// it knows, a follower that has not applied the job yet, bsub --wait
// asks with the submission's index so that the peer answers once it
// holds the job, instead of failing with "job 7: job 7: not found".
func TestWaitOnLoneStaleFollower(t *testing.T) {
	s := clitest.NewSchedd(t)
	s.Handle("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 40, api.SubmitResponse{JobID: 7, Partition: "gpu"})
	})
	s.Handle("GET /v1/jobs/7", func(w http.ResponseWriter, r *http.Request) {
		// The peer is at index 30; it holds the job (stored at 40) only
		// once a blocking query has waited for it.
		if idx, _ := strconv.Atoi(r.URL.Query().Get("index")); idx < 39 {
			clitest.Error(w, http.StatusNotFound, "job 7: not found")
			return
		}
		clitest.JSON(w, http.StatusOK, 41, api.Job{ID: 7, State: api.JobCompleted})
	})
	oldGrace, oldDelay := unreachableGrace, retryDelay
	unreachableGrace, retryDelay = 300*time.Millisecond, 10*time.Millisecond
	t.Cleanup(func() { unreachableGrace, retryDelay = oldGrace, oldDelay })
	code, out, errs := runBsub("-K", "--addr", s.Addr, writeJob(t, goodJob))
	if code != 0 || out != "Job <7> is submitted to partition <gpu>.\n" || errs != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestWaitErrorNamesJobOnce: schedd's refusal already names the job;
// bsub --wait does not say "job 7: job 7: …".
func TestWaitErrorNamesJobOnce(t *testing.T) {
	s := clitest.NewSchedd(t)
	s.Handle("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 1, api.SubmitResponse{JobID: 7, Partition: "gpu"})
	})
	s.Handle("GET /v1/jobs/7", func(w http.ResponseWriter, r *http.Request) {
		clitest.Error(w, http.StatusForbidden, "job 7: permission denied: it belongs to alice")
	})
	code, _, errs := runBsub("-K", "--addr", s.Addr, writeJob(t, goodJob))
	if code != 1 || errs != "bsub: job 7: permission denied: it belongs to alice\n" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

// TestSubmitBatch: several job files and --count go in one POST
// /v1/jobs/batch, one line per job in order; each job has its own request
// id, the same on a retry of the request.
func TestSubmitBatch(t *testing.T) {
	s := clitest.NewSchedd(t)
	var got []api.SubmitBatch
	var heads []string
	s.Handle("POST /v1/jobs/batch", func(w http.ResponseWriter, r *http.Request) {
		var b api.SubmitBatch
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			clitest.Error(w, http.StatusBadRequest, err.Error())
			return
		}
		got, heads = append(got, b), append(heads, r.Header.Get(api.RequestHeader))
		var res api.SubmitBatchResponse
		for i := range b.Jobs {
			res.Jobs = append(res.Jobs, api.SubmitResponse{JobID: uint64(10 + i), Partition: "cpu"})
		}
		clitest.JSON(w, http.StatusCreated, 5, res)
	})
	a := writeJob(t, goodJob)
	b := writeJob(t, strings.Replace(goodJob, `"hello"`, `"other"`, 1))
	code, out, errs := runBsub("--addr", s.Addr, "--count", "2", "-H", a, b)
	want := "Job <10> is submitted to partition <cpu>.\nJob <11> is submitted to partition <cpu>.\n" +
		"Job <12> is submitted to partition <cpu>.\nJob <13> is submitted to partition <cpu>.\n"
	if code != 0 || out != want || errs != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if len(got) != 1 || len(got[0].Jobs) != 4 {
		t.Fatalf("requests %d, want one batch of 4: %+v", len(got), got)
	}
	ids := map[string]bool{}
	for i, j := range got[0].Jobs {
		name, src := "hello", a
		if i >= 2 {
			name, src = "other", b
		}
		if j.Spec.Name != name || j.Source != src || !j.Hold || j.RequestID == "" {
			t.Errorf("job %d: name %q source %q hold %v request %q", i, j.Spec.Name, j.Source, j.Hold, j.RequestID)
		}
		ids[j.RequestID] = true
	}
	if len(ids) != 4 || heads[0] == "" {
		t.Errorf("request ids %v, batch's %q: want 4 distinct ones and the batch's", ids, heads[0])
	}
	for _, r := range s.Requests() {
		if r == "POST /v1/jobs" {
			t.Errorf("a single submit besides the batch: %v", s.Requests())
		}
	}
}

// TestSubmitBatchOldSchedd: a schedd without POST /v1/jobs/batch gets one
// POST /v1/jobs per job.
func TestSubmitBatchOldSchedd(t *testing.T) {
	s := clitest.NewSchedd(t)
	n := uint64(0)
	s.Handle("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		n++
		clitest.JSON(w, http.StatusCreated, 5, api.SubmitResponse{JobID: n, Partition: "cpu"})
	})
	code, out, errs := runBsub("--addr", s.Addr, "--count", "3", writeJob(t, goodJob))
	if code != 0 || strings.Count(out, "is submitted") != 3 || !strings.HasPrefix(out, "Job <1>") || errs != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if n != 3 {
		t.Errorf("%d single submits, want 3: %v", n, s.Requests())
	}
}
