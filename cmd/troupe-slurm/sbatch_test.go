package main

import (
	"bytes"
	"encoding/json"
	"github.com/troupe-hpc/troupe/jobspec"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

// sbatchRun runs sbatch with stdin against a schedd that records the
// submission and answers job 42.
func sbatchRun(t *testing.T, stdin string, args ...string) (api.SubmitRequest, int, string, string) {
	t.Helper()
	s := clitest.NewSchedd(t)
	var got api.SubmitRequest
	s.Handle("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			clitest.Error(w, http.StatusBadRequest, err.Error())
			return
		}
		clitest.JSON(w, http.StatusOK, 5, api.SubmitResponse{JobID: 42, Partition: "cpu"})
	})
	t.Setenv("TROUPE_ADDR", s.Addr)
	var out, errb bytes.Buffer
	var in *strings.Reader
	if stdin != "" {
		in = strings.NewReader(stdin)
	}
	var code int
	if in != nil {
		code = dispatch(append([]string{"/x/libexec/troupe/slurm/sbatch"}, args...), in, &out, &errb)
	} else {
		code = dispatch(append([]string{"sbatch"}, args...), nil, &out, &errb)
	}
	return got, code, out.String(), errb.String()
}

func inDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	t.Chdir(d)
	return d
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestSbatchParsable(t *testing.T) {
	inDir(t)
	writeFile(t, "job.sh", "#!/bin/sh\necho hi\n")
	_, code, out, errs := sbatchRun(t, "", "--parsable", "job.sh")
	if want := clitest.Golden(t, "sbatch_parsable.golden"); code != 0 || out != want || errs != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want %q", code, out, errs, want)
	}
	_, code, out, _ = sbatchRun(t, "", "job.sh")
	if want := clitest.Golden(t, "sbatch.golden"); code != 0 || out != want {
		t.Errorf("exit %d, stdout %q; want %q", code, out, want)
	}
	_, code, out, _ = sbatchRun(t, "", "-Q", "job.sh")
	if code != 0 || out != "" {
		t.Errorf("-Q: exit %d, stdout %q", code, out)
	}
}

// The command line's options win over the script's #SBATCH lines.
func TestSbatchOptions(t *testing.T) {
	dir := inDir(t)
	t.Setenv("SBATCH_TEST_VAR", "kept")
	t.Setenv("SLURM_JOB_ID", "7") // an outer job's: not passed
	writeFile(t, "run.sbatch", "#!/bin/bash\n#SBATCH -J fromscript -n 8\n#SBATCH --time=5 -p gpu\necho $1\n")
	got, code, out, errs := sbatchRun(t, "", "-J", "sim", "-o", "out.%j", "-e", "err.%x", "-p", "cpu", "-A", "physics",
		"-n", "4", "-N", "2", "-c", "2", "--mem=2G", "--time=1:30:00", "--exclusive", "--comment", "why",
		"--no-requeue", "--signal=USR1@60", "--export=ALL,EXTRA=1", "run.sbatch", "a1")
	if code != 0 || out != "Submitted batch job 42\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if !strings.Contains(errs, "--exclusive") || strings.Contains(errs, "--signal") {
		t.Errorf("stderr %q: want a warning for the ignored --exclusive, none for --signal", errs)
	}
	s := got.Spec
	if w := s.Signal; w == nil || w.Signal != "USR1" || w.Before != time.Minute || w.To != jobspec.WarnAll {
		t.Errorf("--signal=USR1@60: warning %+v; want USR1 a minute before the time limit, to every container", w)
	}
	if s.Name != "sim" || s.Partition != "cpu" || s.Account != "physics" || s.Walltime != 90*time.Minute ||
		s.Output != "out.%j" || s.Error != "err.sim" || s.Cluster.Size != 2 || s.Resources.CPU != 4 ||
		s.Resources.Memory != 2<<30 || s.Workdir != dir {
		t.Errorf("spec %+v", s)
	}
	if s.Env["SBATCH_TEST_VAR"] != "kept" || s.Env["EXTRA"] != "1" || s.Env["SLURM_CPUS_PER_TASK"] != "2" || s.Env["SLURM_JOB_ID"] != "" {
		t.Errorf("env %v", s.Env)
	}
	if n := len(s.Command); n < 2 || s.Command[0] != "/bin/bash" || s.Command[n-2] != "run.sbatch" || s.Command[n-1] != "a1" {
		t.Errorf("command %q", s.Command)
	}
}

// One table: every option means the same on the command line and in an
// #SBATCH line.
func TestSbatchSameTableAsDirectives(t *testing.T) {
	inDir(t)
	for _, opt := range [][]string{
		{"-n", "3"}, {"--ntasks=6"}, {"-N", "2"}, {"-c", "3"}, {"--ntasks-per-node=2"}, {"--mem=300M"},
		{"--mem-per-cpu=1G"}, {"-t", "2-00"}, {"-J", "x.y"}, {"-o", "o_%A.%N"}, {"-e", "e"}, {"-p", "gpu"},
		{"-A", "acct"}, {"-D", "/tmp"}, {"--gres=gpu:2"}, {"--gpus-per-node=1"}, {"--export=NONE"},
		{"--dependency=afterok:3"}, {"-H"}, {"--export=ALL,Z=2"},
	} {
		writeFile(t, "d.sh", "#!/bin/sh\n#SBATCH "+strings.Join(opt, " ")+"\ntrue\n")
		writeFile(t, "c.sh", "#!/bin/sh\ntrue\n")
		a, code1, _, e1 := sbatchRun(t, "", "d.sh")
		b, code2, _, e2 := sbatchRun(t, "", append(opt, "c.sh")...)
		a.Spec.Command, b.Spec.Command, a.Spec.Name, b.Spec.Name, a.Source, b.Source = nil, nil, "", "", "", ""
		a.RequestID, b.RequestID = "", "" // each submission its own
		delete(a.Spec.Env, "TROUPE_ADDR") // each run's own fake schedd
		delete(b.Spec.Env, "TROUPE_ADDR")
		if opt[0] == "-H" && (!a.Hold || !b.Hold) || strings.HasPrefix(opt[0], "--dep") && (a.DependsOn == nil || b.DependsOn == nil) {
			t.Errorf("%q: hold %v/%v, dependency %v/%v", opt, a.Hold, b.Hold, a.DependsOn, b.DependsOn)
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if code1 != 0 || code2 != 0 || !bytes.Equal(ja, jb) {
			t.Errorf("%q: #SBATCH gives (%d, %s)\n%s\ncommand line gives (%d, %s)\n%s", opt, code1, e1, ja, code2, e2, jb)
		}
	}
}

func TestSbatchWrapAndStdin(t *testing.T) {
	inDir(t)
	got, code, out, errs := sbatchRun(t, "", "--parsable", "-J", "w", "--wrap=echo 'hi there' > x")
	if code != 0 || out != "42\n" || errs != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if c := got.Spec.Command; len(c) < 3 || c[0] != "/bin/sh" || !strings.Contains(c[2], "echo 'hi there' > x\n") || got.Spec.Output != "slurm-%j.out" {
		t.Errorf("--wrap: %q, output %q", c, got.Spec.Output)
	}
	got, code, _, errs = sbatchRun(t, "", "--wrap=true")
	if code != 0 || got.Spec.Name != "wrap" {
		t.Errorf("--wrap default name: %q (exit %d, %s)", got.Spec.Name, code, errs)
	}
	got, code, _, errs = sbatchRun(t, "#!/bin/sh\n#SBATCH -n 2\necho stdin\n")
	if code != 0 || got.Spec.Name != "sbatch" || got.Spec.Resources.CPU != 2 {
		t.Errorf("stdin: exit %d, %s, %+v", code, errs, got.Spec)
	}
	got, code, _, errs = sbatchRun(t, "#!/bin/sh\n#SBATCH -n 3\necho stdin\n", "/dev/stdin", "arg")
	if n := len(got.Spec.Command); code != 0 || got.Spec.Name != "stdin" || got.Spec.Resources.CPU != 3 || got.Spec.Command[n-1] != "arg" {
		t.Errorf("/dev/stdin: exit %d, %s, %+v", code, errs, got.Spec)
	}
}

func TestSbatchErrors(t *testing.T) {
	inDir(t)
	writeFile(t, "plain.sh", "echo no shebang\n")
	writeFile(t, "bad.sh", "#!/bin/sh\n#SBATCH --mem=lots\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plain.sh"}, "sbatch: error: This does not look like a batch script."},
		{[]string{"bad.sh"}, "sbatch: error: bad.sh: bad directive: line 2: #SBATCH --mem lots"},
		{[]string{"-t", "soon", "--wrap=true"}, "sbatch: error: --time soon: want minutes"},
		{[]string{"--frobnicate", "x.sh"}, "sbatch: unrecognized option '--frobnicate'"},
		{[]string{"-n"}, "sbatch: option requires an argument -- 'n'"},
		{[]string{"missing.sh"}, "sbatch: error: Unable to open file missing.sh"},
		{[]string{"--wrap=true", "arg"}, "sbatch: error: Script arguments not permitted with --wrap option"},
	} {
		_, code, _, errs := sbatchRun(t, "", c.args...)
		if code != 1 || !strings.HasPrefix(errs, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 1, %q", c.args, code, errs, c.want)
		}
	}
}

func TestDispatch(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch([]string{"troupe-slurm", "--list"}, nil, &out, &errb); code != 0 || out.String() != "sacct\nsbatch\nscancel\nscontrol\nsinfo\nsqueue\nsrun\n" {
		t.Errorf("--list: %d %q", code, out.String())
	}
	out.Reset()
	if code := dispatch([]string{filepath.Join("/opt/troupe/libexec/troupe/slurm", "squeue"), "--help"}, nil, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "Usage: squeue") {
		t.Errorf("squeue --help: %d %q", code, out.String())
	}
	if code := dispatch([]string{"troupe-slurm", "frob"}, nil, &out, &errb); code != 2 {
		t.Errorf("frob: %d", code)
	}
}

func TestGetopt(t *testing.T) {
	opts := []option{{'n', "noheader", false}, {'u', "user", true}, {'o', "format", true}, {0, "name", true}}
	got, rest, err := getopt([]string{"-nu", "bob", "x", "--form=%i", "--name", "a", "-ojobid", "--", "-n"}, opts, false, nil)
	want := []given{{"noheader", ""}, {"user", "bob"}, {"format", "%i"}, {"name", "a"}, {"format", "jobid"}}
	if err != nil || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(rest, []string{"x", "-n"}) {
		t.Errorf("got %q %q %v", got, rest, err)
	}
	if _, _, err := getopt([]string{"--na"}, []option{{0, "name", true}, {0, "nap", false}}, false, nil); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("ambiguous prefix: %v", err)
	}
	_, rest, _ = getopt([]string{"-n", "cmd", "-n"}, opts, true, nil)
	if !reflect.DeepEqual(rest, []string{"cmd", "-n"}) {
		t.Errorf("stop at first: %q", rest)
	}
}

// The Makefile links exactly troupe-slurm's commands, and none of them
// is a command of its own that `make build` would put in bin/.
func TestMakefileLinks(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for line := range strings.SplitSeq(string(mk), "\n") {
		if rest, ok := strings.CutPrefix(line, "SLURM_CMDS := "); ok {
			cmds = strings.Fields(rest)
		}
	}
	if !reflect.DeepEqual(cmds, names()) {
		t.Errorf("Makefile SLURM_CMDS %q, troupe-slurm's commands %q", cmds, names())
	}
	for _, c := range names() {
		if _, err := os.Stat(filepath.Join("..", c)); err == nil {
			t.Errorf("cmd/%s exists: make build would put a bare %s in bin/, shadowing a real Slurm's", c, c)
		}
	}
}

// --dependency=singleton waits for my unfinished jobs of the same name.
func TestSbatchSingleton(t *testing.T) {
	inDir(t)
	me, _ := user.Current()
	s := clitest.NewSchedd(t)
	var got api.SubmitRequest
	s.Handle("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		clitest.JSON(w, http.StatusOK, 5, api.SubmitResponse{JobID: 42, Partition: "cpu"})
	})
	s.Handle("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		jobs := clitest.Jobs() // others' and ended ones do not count
		for i, st := range []api.JobState{api.JobRunning, api.JobPending, api.JobCompleted} {
			j := clitest.Job(12)
			j.ID, j.User, j.Name, j.State = uint64(50+i), me.Username, "rtest", st
			jobs = append(jobs, j)
		}
		clitest.JSON(w, http.StatusOK, 7, api.JobList{Jobs: jobs, Index: 7})
	})
	t.Setenv("TROUPE_ADDR", s.Addr)
	var out, errb bytes.Buffer
	code := dispatch([]string{"sbatch", "--dependency=singleton", "--job-name=rtest", "--wrap=hostname"}, nil, &out, &errb)
	want := &api.Dependency{Conditions: []api.Condition{{Kind: api.DepEnded, JobID: 50}, {Kind: api.DepEnded, JobID: 51}}}
	if code != 0 || !reflect.DeepEqual(got.DependsOn, want) {
		t.Errorf("exit %d (%s): depends on %+v, want %+v", code, errb.String(), got.DependsOn, want)
	}
	got = api.SubmitRequest{}
	code = dispatch([]string{"sbatch", "-d", "singleton", "-J", "alone", "--wrap=hostname"}, nil, &out, &errb)
	if code != 0 || got.DependsOn != nil {
		t.Errorf("no earlier job: exit %d, depends on %+v", code, got.DependsOn)
	}
}

// Slurm's filename escapes, as sbatch(1) lists them: %J (jobid.stepid;
// the batch script's step has no number, so the job id), %A (the
// array's job id), %N (the node), %x (the name), %a (the index); %% is a
// literal % and the letter after it stays as written.
func TestSbatchOutputEscapes(t *testing.T) {
	inDir(t)
	writeFile(t, "w.sh", "#!/bin/sh\n#SBATCH -o logs/dask-worker-%J.out\n#SBATCH -e logs/dask-worker-%J.err\ntrue\n")
	for _, tc := range []struct {
		args            []string
		output, errFile string
	}{
		{[]string{"w.sh"}, "logs/dask-worker-%j.out", "logs/dask-worker-%j.err"},
		{[]string{"-J", "fit", "-o", "%x-%A_%a.%N.%J", "w.sh"}, "fit-%j_%a.%h.%j", "logs/dask-worker-%j.err"},
		{[]string{"-o", "100%%J-%j", "-e", "%%A%%N", "w.sh"}, "100%%J-%j", "%%A%%N"},
	} {
		got, code, _, errs := sbatchRun(t, "", tc.args...)
		if code != 0 || got.Spec.Output != tc.output || got.Spec.Error != tc.errFile {
			t.Errorf("sbatch %q: exit %d (%s), output %q, error %q; want %q, %q", tc.args, code, errs, got.Spec.Output, got.Spec.Error, tc.output, tc.errFile)
		}
	}
}
