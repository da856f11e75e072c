package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
	"github.com/troupe-hpc/troupe/jobspec/script"
)

// submitted runs bsub with stdin against a schedd that records the
// submission.
func submitted(t *testing.T, stdin string, args ...string) (api.SubmitRequest, int, string, string) {
	t.Helper()
	s := clitest.NewSchedd(t)
	var got api.SubmitRequest
	s.Handle("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			clitest.Error(w, http.StatusBadRequest, err.Error())
			return
		}
		clitest.JSON(w, http.StatusOK, 5, api.SubmitResponse{JobID: 9, Partition: "cpu"})
	})
	var out, errb bytes.Buffer
	code := run(append([]string{"--addr", s.Addr}, args...), strings.NewReader(stdin), &out, &errb)
	return got, code, out.String(), errb.String()
}

// inDir runs the test in a fresh directory.
func inDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	t.Chdir(d)
	return d
}

func TestCommandLineJob(t *testing.T) {
	dir := inDir(t)
	t.Setenv("TROUPE_TEST_VAR", "kept")
	got, code, out, errs := submitted(t, "", "-n", "4", "-W", "10", "-o", "logs/%J.%x.out", "python", "train.py", "-n", "3")
	if code != 0 || out != "Job <9> is submitted to partition <cpu>.\n" || errs != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	s := got.Spec
	if want := []string{"/bin/sh", "-c", "python train.py -n 3"}; !reflect.DeepEqual(s.Command, want) {
		t.Errorf("command %q, want %q (the command's own -n is its own)", s.Command, want)
	}
	if s.Resources.CPU != 4 || s.Cluster.Size != 1 || s.Walltime != 10*time.Minute || s.Output != "logs/%j.python.out" || s.Name != "python" {
		t.Errorf("spec %+v", s)
	}
	if s.Image != "host" || s.Workdir != dir || s.Env["TROUPE_TEST_VAR"] != "kept" || got.Source != "command line" {
		t.Errorf("image %q workdir %q (want %q) env %v source %q", s.Image, s.Workdir, dir, s.Env["TROUPE_TEST_VAR"], got.Source)
	}
	if len(s.Mounts) != 1 || s.Mounts[0].Source != dir || s.Mounts[0].Target != dir {
		t.Errorf("mounts %+v: want the submit directory", s.Mounts)
	}
}

// TestScriptArray: #BSUB -J name[range] and bsub --array make a script
// job an array; -o keeps %I for the nodes.
func TestScriptArray(t *testing.T) {
	inDir(t)
	got, code, out, errs := submitted(t, "#!/bin/sh\n#BSUB -J \"sweep[1-4%2]\"\n#BSUB -o out.%J.%I\necho $LSB_JOBINDEX\n")
	if code != 0 || errs != "" || out != "Job <9> is submitted to partition <cpu>.\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if a := got.Spec.Array; a == nil || a.Range != "1-4" || a.MaxRunning != 2 || got.Spec.Name != "sweep" || got.Spec.Output != "out.%j.%I" {
		t.Fatalf("spec name %q output %q array %+v", got.Spec.Name, got.Spec.Output, got.Spec.Array)
	}
	got, code, _, errs = submitted(t, "", "--array", "0-3", "echo", "hi")
	if code != 0 || got.Spec.Array == nil || got.Spec.Array.Range != "0-3" {
		t.Fatalf("exit %d (%s), array %+v", code, errs, got.Spec.Array)
	}
}

const lsfScript = `#!/bin/bash
#BSUB -J fit
#BSUB -n 8 -R "span[ptile=4] rusage[mem=512MB]"
#BSUB -W 1:00
#BSUB -o fit.%J.out
#BSUB -x
#BSUB -frob
#BSUB -env "all, ~TROUPE_SECRET"
echo "$@"
`

func TestScriptFile(t *testing.T) {
	dir := inDir(t)
	if err := os.WriteFile("fit.sh", []byte(lsfScript), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TROUPE_SECRET", "x")
	t.Setenv("TROUPE_OTHER", "y")
	got, code, out, errs := submitted(t, "", "-q", "gpu", "-cwd", "/tmp", "fit.sh", "a1", "a2")
	if code != 0 || out != "Job <9> is submitted to partition <cpu>.\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	wantErrs := "bsub: warning: fit.sh: line 6: -x: accepted and ignored: troupe has no exclusive nodes; the job shares its nodes within its resources\n" +
		"bsub: warning: fit.sh: line 7: -frob: unknown #BSUB option; ignored\n"
	if errs != wantErrs {
		t.Errorf("stderr\n%s\nwant\n%s", errs, wantErrs)
	}
	s := got.Spec
	if want := []string{"/bin/bash", "-c", lsfScript, "fit.sh", "a1", "a2"}; !reflect.DeepEqual(s.Command, want) {
		t.Errorf("command %q", s.Command)
	}
	if s.Name != "fit" || s.Partition != "gpu" || s.Cluster.Size != 2 || s.Cluster.Mode != "multi-node" || s.Resources.CPU != 4 ||
		s.Resources.Memory != 2<<30 || s.Walltime != time.Hour || s.Workdir != "/tmp" || s.Output != "/tmp/fit.%j.out" {
		t.Errorf("spec %+v", s)
	}
	if _, ok := s.Env["TROUPE_SECRET"]; ok || s.Env["TROUPE_OTHER"] != "y" {
		t.Errorf("env: ~TROUPE_SECRET not honoured: %v", s.Env)
	}
	if got.Source != "fit.sh" || got.Cwd != dir {
		t.Errorf("source %q cwd %q", got.Source, got.Cwd)
	}
}

func TestScriptOnStdin(t *testing.T) {
	inDir(t)
	src := "#SBATCH -N 2 --ntasks-per-node=2 -c 2 --mem=512 -t 5 -J sweep --export=NONE,A=1\nsrun hostname\n"
	got, code, _, errs := submitted(t, src, "-H")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	s := got.Spec
	if want := []string{"/bin/sh", "-c", src, "stdin"}; !reflect.DeepEqual(s.Command, want) {
		t.Errorf("command %q", s.Command)
	}
	if s.Name != "sweep" || s.Cluster.Size != 2 || s.Resources.CPU != 4 || s.Resources.Memory != 512<<20 || s.Walltime != 5*time.Minute ||
		// --export=NONE passes none of mine; -c is Slurm's SLURM_CPUS_PER_TASK.
		!reflect.DeepEqual(s.Env, map[string]string{"A": "1", "SLURM_CPUS_PER_TASK": "2"}) || !got.Hold || got.Source != "stdin" {
		t.Errorf("request %+v", got)
	}

	// A plain shell script on stdin, no directives, no shebang.
	got, code, _, errs = submitted(t, "echo hello > out.txt\n")
	if code != 0 || errs != "" || got.Spec.Command[2] != "echo hello > out.txt\n" || got.Spec.Name != "stdin" {
		t.Fatalf("exit %d, stderr %q, spec %+v", code, errs, got.Spec)
	}

	// A job file on stdin is a job file.
	got, code, _, errs = submitted(t, goodJob)
	if code != 0 || errs != "" || got.Spec.Name != "hello" || got.Spec.Cluster.Size != 2 {
		t.Fatalf("exit %d, stderr %q, spec %+v", code, errs, got.Spec)
	}
}

func TestScriptDependencyAndImage(t *testing.T) {
	inDir(t)
	t.Setenv(EnvScriptImage, "pytorch-2.3")
	got, code, _, errs := submitted(t, "#BSUB -w 'done(3)'\n#BSUB -G phys\ntrue\n")
	if code != 0 || errs != "" || got.DependsOn == nil || got.Spec.Image != "pytorch-2.3" || got.Spec.Account != "phys" {
		t.Fatalf("exit %d, stderr %q, request %+v", code, errs, got)
	}
	got, code, _, _ = submitted(t, "#BSUB -app host\ntrue\n")
	if code != 0 || got.Spec.Image != "host" {
		t.Errorf("-app host: exit %d image %q", code, got.Spec.Image)
	}
}

func TestScriptErrors(t *testing.T) {
	dir := inDir(t)
	bad := filepath.Join(dir, "bad.sh")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\n#BSUB -n 2\n#BSUB -W later\necho\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, code, _, errs := submitted(t, "", bad)
	if want := "bsub: " + bad + ": bad directive: line 3: #BSUB -W later: want [HH:]MM, days-HH:MM:SS or a duration such as 2h, more than 0\n"; code != 1 || errs != want {
		t.Errorf("exit %d, stderr %q, want %q", code, errs, want)
	}
	_, code, _, errs = submitted(t, "", "-M", "lots", "hostname")
	if code != 1 || !strings.Contains(errs, "-M lots: want a memory size") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	_, code, _, errs = submitted(t, "", "missing.sh")
	if code != 1 || !strings.Contains(errs, "missing.sh: no such file") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

func TestScriptDryRun(t *testing.T) {
	inDir(t)
	var out, errb bytes.Buffer
	code := run([]string{"--addr", clitest.Unreachable(t), "--dry-run=json", "-n", "2", "-R", "span[hosts=1]", "echo", "hi"}, strings.NewReader(""), &out, &errb)
	var dr struct{ Submit api.SubmitRequest }
	if err := json.Unmarshal(out.Bytes(), &dr); err != nil || code != 0 {
		t.Fatalf("exit %d, %v, stdout %s, stderr %s", code, err, out.String(), errb.String())
	}
	if dr.Submit.Spec.Resources.CPU != 2 || dr.Submit.Spec.Command[2] != "echo hi" {
		t.Errorf("spec %+v", dr.Submit.Spec)
	}
}

// TestLSFOptionsDefined: every LSF option jobspec/script reads is a flag
// of bsub, and the script-only ones are listed as such.
func TestLSFOptionsDefined(t *testing.T) {
	_, help, _ := runBsub("-h")
	for _, n := range script.LSFOptions() {
		re := regexp.MustCompile(`(?m)(^  |, )-?` + regexp.QuoteMeta(n) + `( |,|$)`)
		if !re.MatchString(help) {
			t.Errorf("bsub does not define LSF's %s:\n%s", n, help)
		}
	}
	for _, n := range lsfOnly {
		if known, _ := script.LSFOption("-" + n); !known {
			t.Errorf("-%s is listed as an LSF option but jobspec/script does not read it", n)
		}
	}
}

// TestSnakemakePluginCall submits as Snakemake's LSF executor plugin
// does: -R twice (both count), -env all, -cwd, a name with parentheses,
// and the command as one quoted argument.
func TestSnakemakePluginCall(t *testing.T) {
	inDir(t)
	got, code, _, errs := submitted(t, "", "-J", "Snakemake_rule_a___(0f3a)", "-o", "/tmp/x.log", "-e", "/tmp/x.log", "-env", "all",
		"-W", "10", "-n", "2", "-R", "rusage[mem=1048576.0]", "-R", "span[hosts=1]", "-cwd", "/srv/wf",
		"python3 -m snakemake --target-jobs 'a:' --cores all")
	s := got.Spec
	if code != 0 || s.Resources.CPU != 2 || s.Resources.Memory != 2<<30 || s.Cluster.Size != 1 || s.Workdir != "/srv/wf" ||
		s.Name != "Snakemake_rule_a____0f3a_" || s.Command[2] != "python3 -m snakemake --target-jobs 'a:' --cores all" {
		t.Fatalf("exit %d, stderr %q, spec %+v", code, errs, s)
	}
	if !strings.Contains(errs, `bsub: warning: command line: -J: job name "Snakemake_rule_a___(0f3a)"`) {
		t.Errorf("stderr %q: want a warning on the name", errs)
	}
}

// TestCommandLineMail (issue 14 item 6j): bsub -B -N -u on a command line
// puts the mail in the submission, and --dry-run shows it; -B and -N no
// longer warn "accepted and ignored".
func TestCommandLineMail(t *testing.T) {
	inDir(t)
	var out, errb bytes.Buffer
	code := run([]string{"--addr", clitest.Unreachable(t), "--dry-run=json", "-B", "-N", "-u", "ada@example.org", "echo", "hi"}, strings.NewReader(""), &out, &errb)
	var dr struct{ Submit api.SubmitRequest }
	if err := json.Unmarshal(out.Bytes(), &dr); err != nil || code != 0 || errb.String() != "" {
		t.Fatalf("exit %d, %v, stdout %s, stderr %s", code, err, out.String(), errb.String())
	}
	if m := dr.Submit.Spec.Mail; m == nil || *m != (api.Mail{To: "ada@example.org", Begin: true, End: true}) {
		t.Errorf("mail %+v", m)
	}
	out.Reset()
	code = run([]string{"--addr", clitest.Unreachable(t), "--dry-run", "-N", "echo", "hi"}, strings.NewReader(""), &out, &errb)
	if code != 0 || !regexp.MustCompile(`(?m)^  Mail: +end to \S+$`).MatchString(out.String()) {
		t.Errorf("exit %d, dry run:\n%s", code, out.String())
	}
	out.Reset()
	errb.Reset()
	code = run([]string{"--addr", clitest.Unreachable(t), "--dry-run", "-N", "-u", "ada\nBcc: eve", "echo", "hi"}, strings.NewReader(""), &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "want a user name or name@domain") {
		t.Errorf("bad -u: exit %d, stderr %q", code, errb.String())
	}
}

// TestWarningFlags: bsub -wa SIG -wt MINUTES asks for a warning signal
// to every container that long before the walltime ends, on a command
// line and over a job file's signal alike; one without the other is
// refused.
func TestWarningFlags(t *testing.T) {
	dir := inDir(t)
	want := api.Warning{Signal: "USR1", Before: 2 * time.Minute, To: "all"}
	file := filepath.Join(dir, "w.hcl")
	if err := os.WriteFile(file, []byte("job \"w\" {\n  image = \"host\"\n  walltime = \"1h\"\n  command = [\"true\"]\n  signal = { name = \"TERM\", before = \"5s\" }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-W", "10", "echo", "hi"}, {file}} {
		var out, errb bytes.Buffer
		code := run(append([]string{"--addr", clitest.Unreachable(t), "--dry-run=json", "-wa", "USR1", "-wt", "2"}, args...), strings.NewReader(""), &out, &errb)
		var dr struct{ Submit api.SubmitRequest }
		if err := json.Unmarshal(out.Bytes(), &dr); err != nil || code != 0 {
			t.Fatalf("%v: exit %d, %v, stdout %s, stderr %s", args, code, err, out.String(), errb.String())
		}
		if w := dr.Submit.Spec.Signal; w == nil || *w != want {
			t.Errorf("%v: warning %+v, want %+v", args, w, want)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"--addr", clitest.Unreachable(t), "--dry-run=json", "-wa", "USR1", "echo", "hi"}, strings.NewReader(""), &out, &errb); code == 0 || !strings.Contains(errb.String(), "-wa and -wt go together") {
		t.Errorf("-wa alone: exit %d, stderr %s", code, errb.String())
	}
}
