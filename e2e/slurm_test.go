package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// slurmLinks installs troupe's Slurm commands under root as `make
// install` would under a prefix: root/bin/troupe-slurm and, by the
// Makefile's slurm-links target, the links root/libexec/troupe/slurm/*,
// whose directory it returns. Jobs run on the nodes' own tree (image
// "host") with the submitter's PATH, so srun inside a job is found
// where the submitter's was, as on a Slurm cluster whose nodes have its
// commands installed: the tests install them in the submit directory,
// the part of the test's tree their containers see.
func slurmLinks(t *testing.T, root string) string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("SKIP: needs make, whose slurm-links target lays out Slurm's commands")
	}
	b, err := os.ReadFile(filepath.Join(bin, "troupe-slurm"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "troupe-slurm"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	links := filepath.Join(root, "libexec", "troupe", "slurm")
	if out, err := exec.Command("make", "-s", "-C", "..", "slurm-links", "BIN="+filepath.Join(root, "bin"), "SLURM_DIR="+links).CombinedOutput(); err != nil {
		t.Fatalf("make slurm-links: %v\n%s", err, out)
	}
	return links
}

var slurmCommands = []string{"sacct", "sbatch", "scancel", "sinfo", "squeue", "srun"}

// TestSlurmCommandsDoNotShadow: with Debian's slurm-wlm installed, the
// real commands stay /usr/bin's unless a user puts troupe's directory
// first on PATH, and troupe's binaries directory holds none of them.
func TestSlurmCommandsDoNotShadow(t *testing.T) {
	if _, err := os.Stat("/usr/bin/sbatch"); err != nil {
		t.Skip("SKIP: Debian's slurm-wlm is not installed (contrib/dev/install-deps installs it)")
	}
	prefix := searchable(t)
	links := slurmLinks(t, prefix)
	conf := filepath.Join(t.TempDir(), "slurm.conf") // enough for the real ones' --version
	if err := os.WriteFile(conf, []byte("ClusterName=e2e\nSlurmctldHost=localhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	which := func(path, c string) (string, string) {
		cmd := exec.Command("/bin/sh", "-c", `command -v "$0"; "$0" --version`, c)
		cmd.Env = []string{"PATH=" + path, "SLURM_CONF=" + conf}
		out, _ := cmd.CombinedOutput()
		first, rest, _ := strings.Cut(string(out), "\n")
		return first, rest
	}
	for _, c := range slurmCommands {
		for _, b := range []string{bin, filepath.Join(prefix, "bin")} {
			if _, err := os.Lstat(filepath.Join(b, c)); err == nil {
				t.Errorf("%s/%s exists: troupe's bin directory would shadow Slurm's %s", b, c, c)
			}
		}
		for _, path := range []string{"/usr/bin:/bin", bin + ":" + prefix + "/bin:/usr/bin:/bin"} {
			at, version := which(path, c)
			if at != "/usr/bin/"+c || !strings.HasPrefix(version, "slurm-wlm 22.05") {
				t.Errorf("PATH=%s: %s is %q, version %q; want Debian's /usr/bin/%s", path, c, at, version, c)
			}
		}
		at, version := which(links+":/usr/bin:/bin", c)
		if at != links+"/"+c || !strings.Contains(version, "troupe") {
			t.Errorf("troupe's directory first: %s is %q, version %q; want troupe's", c, at, version)
		}
		if target, err := os.Readlink(filepath.Join(links, c)); err != nil || filepath.Base(target) != "troupe-slurm" {
			t.Errorf("%s/%s: a link to %q, %v; want troupe-slurm", links, c, target, err)
		}
	}
}

// slurmAs runs a Slurm command (troupe's, from links, first on PATH) as
// u in dir with stdin.
func (c *devCluster) slurmAs(t *testing.T, u e2eUser, links, dir, stdin string, name string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(links, name), args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + links + ":" + bin + ":/usr/local/bin:/usr/bin:/bin", "TROUPE_ADDR=" + c.addr,
		"HOME=" + dir, "LANG=C.UTF-8", "USER=" + u.name}
	cmd.Stdin = strings.NewReader(stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %q: %v", name, args, err)
	}
	return stdout.String(), stderr.String(), code
}

// sbatchID submits with sbatch --parsable and returns the job id.
func (c *devCluster) sbatchID(t *testing.T, u e2eUser, links, dir, stdin string, args ...string) uint64 {
	t.Helper()
	out, errs, code := c.slurmAs(t, u, links, dir, stdin, "sbatch", append([]string{"--parsable"}, args...)...)
	id, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if code != 0 || err != nil {
		t.Fatalf("sbatch %q: exit %d, stdout %q, stderr %q", args, code, out, errs)
	}
	return id
}

// TestSbatchSession runs Slurm-style jobs as nobody through troupe's
// sbatch: a two-container script on /dev/stdin whose srun starts four
// tasks over both containers (the other one through the session's ssh),
// each with Slurm's variables; a failing --wrap job and a cancelled one;
// squeue, sacct and sinfo report them in Slurm's words.
func TestSbatchSession(t *testing.T) {
	needRunc(t)
	c := startCluster(t, 2, "2")
	base := searchable(t)
	dir := dirOf(t, nobodyUser, 0o755, base, "submit")
	links := slurmLinks(t, filepath.Join(dir, ".troupe"))

	script := `#!/bin/sh
#SBATCH -J slurmy -N 2 --ntasks-per-node=2 -t 5
#SBATCH -o out.%j
echo "job=$SLURM_JOB_ID name=$SLURM_JOB_NAME nodes=$SLURM_JOB_NODELIST ntasks=$SLURM_NTASKS tpn=$SLURM_TASKS_PER_NODE submit=$SLURM_SUBMIT_DIR"
srun -l sh -c 'echo "$(hostname) $SLURM_PROCID/$SLURM_NTASKS on $SLURMD_NODENAME node $SLURM_NODEID local $SLURM_LOCALID in $(pwd)"' | sort
srun -N 2 -n 2 sh -c 'exit $SLURM_PROCID'
echo "srun exit $?"
`
	id := c.sbatchID(t, nobodyUser, links, dir, script, "/dev/stdin")
	j := c.waitState(id, 3*time.Minute, func(j api.Job) bool { return j.State.Terminal() })
	out, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("out.%d", id)))
	want := fmt.Sprintf("job=%d name=slurmy nodes=main1,sub1 ntasks=4 tpn=2(x2) submit=%s\n", id, dir) +
		fmt.Sprintf("0: main1 0/4 on main1 node 0 local 0 in %s\n", dir) +
		fmt.Sprintf("1: main1 1/4 on main1 node 0 local 1 in %s\n", dir) +
		fmt.Sprintf("2: sub1 2/4 on sub1 node 1 local 0 in %s\n", dir) +
		fmt.Sprintf("3: sub1 3/4 on sub1 node 1 local 1 in %s\n", dir) +
		"srun: error: sub1: task 1: Exited with exit code 1\n" + // stderr, in the output file
		"srun exit 1\n"
	if j.State != api.JobCompleted || !strings.HasPrefix(string(out), want) {
		t.Errorf("job %d: %s (%s), output:\n%s\nwant:\n%s", id, j.State, j.Reason, out, want)
	}

	// --wait blocks until the end; /dev/null discards the output.
	waited, errs, code := c.slurmAs(t, nobodyUser, links, dir, "", "sbatch", "--wait", "--output=/dev/null", "--wrap", "echo gone; exit 0")
	if code != 0 || !strings.HasPrefix(waited, "Submitted batch job ") {
		t.Errorf("sbatch --wait --output=/dev/null: exit %d, %q, %s", code, waited, errs)
	} else if n, _ := filepath.Glob(filepath.Join(dir, "slurm-*.out")); len(n) != 0 {
		t.Errorf("--output=/dev/null left %q", n)
	}
	// A job without the submitter's PATH finds the srun nodelet mounts
	// (/usr/bin/srun here is Debian's, which knows no troupe job).
	_, errs, code = c.slurmAs(t, nobodyUser, links, dir, "", "sbatch", "--wait", "--export=NONE", "-o", "mounted.out",
		"--wrap", "command -v srun; srun -n1 sh -c 'echo task $SLURM_PROCID of job $SLURM_JOB_ID'")
	if b, _ := os.ReadFile(filepath.Join(dir, "mounted.out")); code != 0 || !strings.HasPrefix(string(b), "/.troupe/slurm/srun\ntask 0 of job ") {
		t.Errorf("--export=NONE job: exit %d (%s), output %q; want /.troupe/slurm/srun's task", code, errs, b)
	}
	failed := c.sbatchID(t, nobodyUser, links, dir, "", "-J", "bad", "--wrap", "echo failing; exit 3")
	long := c.sbatchID(t, nobodyUser, links, dir, "", "-J", "long", "-t", "5", "--wrap", "sleep 300")
	c.waitState(long, 2*time.Minute, func(j api.Job) bool { return j.State == api.JobRunning })
	q, errs, code := c.slurmAs(t, nobodyUser, links, dir, "", "squeue", "-h", "-o", "%i %t %T %j %u", "-u", "nobody")
	if code != 0 || !strings.Contains(q, fmt.Sprintf("%d R RUNNING long nobody\n", long)) {
		t.Errorf("squeue: exit %d, %q, %s", code, q, errs)
	}
	if _, errs, code := c.slurmAs(t, nobodyUser, links, dir, "", "scancel", strconv.FormatUint(long, 10)); code != 0 {
		t.Errorf("scancel: exit %d, %s", code, errs)
	}
	c.waitState(long, 2*time.Minute, func(j api.Job) bool { return j.State.Terminal() })
	c.waitState(failed, 2*time.Minute, func(j api.Job) bool { return j.State.Terminal() })
	if b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("slurm-%d.out", failed))); string(b) != "failing\n" {
		t.Errorf("slurm-%d.out: %q, want Slurm's default output file", failed, b)
	}

	acct, errs, code := c.slurmAs(t, nobodyUser, links, dir, "", "sacct", "-X", "-P", "-n", "--format=JobIdRaw,JobName,State,ExitCode",
		"-j", fmt.Sprintf("%d,%d,%d", id, failed, long))
	wantAcct := fmt.Sprintf("%d|slurmy|COMPLETED|0:0\n%d|bad|FAILED|3:0\n%d|long|CANCELLED|", id, failed, long)
	if code != 0 || !strings.HasPrefix(acct, wantAcct) {
		t.Errorf("sacct: exit %d, %q, %s; want %q...", code, acct, errs, wantAcct)
	}
	all, _, _ := c.slurmAs(t, nobodyUser, links, dir, "", "squeue", "-h", "-t", "all", "-o", "%i:%t", "-j", strconv.FormatUint(failed, 10))
	if all != fmt.Sprintf("%d:F\n", failed) {
		t.Errorf("squeue -t all -j %d: %q", failed, all)
	}
	parts, _, _ := c.slurmAs(t, nobodyUser, links, dir, "", "sinfo", "-h", "-o", "%P")
	if !strings.HasSuffix(strings.TrimSpace(parts), "*") {
		t.Errorf("sinfo -o %%P: %q, want the default partition starred", parts)
	}
}

// TestSnakemakeSlurm runs Debian's snakemake 7.21, unmodified, as nobody,
// through its --slurm executor against troupe's Slurm commands: sinfo
// -o %P for the default partition, sacct for an account to guess,
// sbatch -J -o --export=ALL -p --cpus-per-task -D --wrap for each rule,
// sacct -P -n --format=JobIdRaw,State -j for its state, and inside
// each job srun -n1 --cpu-bind=q running snakemake's job step. Every
// output is checked.
func TestSnakemakeSlurm(t *testing.T) {
	needRunc(t)
	snakemake, err := exec.LookPath("snakemake")
	if err != nil {
		t.Skip("SKIP: snakemake is not installed (apt-get install snakemake; contrib/dev/install-deps does)")
	}
	c := startCluster(t, 1, "2")
	base := searchable(t)
	dir := dirOf(t, nobodyUser, 0o755, base, "workflow")
	links := slurmLinks(t, filepath.Join(dir, ".troupe"))
	if err := os.WriteFile(filepath.Join(dir, "Snakefile"), []byte(snakefile), 0o644); err != nil {
		t.Fatal(err)
	}
	// One status check a second rather than --slurm's one in 33 s.
	out, err := c.toolAsNobody(t, 6*time.Minute, dir, links, snakemake, "--slurm", "--jobs", "2", "--latency-wait", "30",
		"--max-status-checks-per-second", "1", "--default-resources", "runtime=5", "mem_mb=200", "--directory", dir)
	logs, _ := filepath.Glob(filepath.Join(dir, ".snakemake", "slurm_logs", "*", "*.log"))
	if err != nil {
		var b strings.Builder
		for _, l := range logs {
			s, _ := os.ReadFile(l)
			b.WriteString("== " + l + "\n" + string(s))
		}
		t.Fatalf("snakemake: %v\n%s\njob logs:\n%s", err, out, b.String())
	}
	for file, want := range map[string]string{
		"out/hello.txt": "hello from troupe\n",
		"out/upper.txt": "HELLO FROM TROUPE\n",
		"out/count.txt": "3\n",
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q\nsnakemake:\n%s", file, b, err, want, out)
		}
	}
	// Three jobs, each with its Slurm log where snakemake said.
	if len(logs) != 3 {
		t.Errorf(".snakemake/slurm_logs: %q, want 3 job logs", logs)
	}
	acct, _, _ := c.slurmAs(t, nobodyUser, links, dir, "", "sacct", "-X", "-P", "-n", "--format=JobName,State", "-u", "nobody")
	if strings.Count(acct, "|COMPLETED\n") != 3 || !strings.Contains(acct, "snakejob") {
		t.Errorf("sacct: %q, want 3 snakejobs COMPLETED", acct)
	}
}

// rscript is an R session that runs a function on the cluster with
// rslurm: slurm_call writes a #SBATCH script and submits it with
// sbatch; get_slurm_out(wait = TRUE) polls squeue -hn NAME and, while
// the job is queued, blocks on sbatch --dependency=singleton --wait
// --output=/dev/null --wrap=hostname before reading the result.
const rscript = `library(rslurm)
sjob <- slurm_call(function(a, b) a * b + nchar(Sys.getenv("SLURM_JOB_ID")) * 0,
                   list(a = 6, b = 7), jobname = "rtest", slurm_options = list(time = "5"))
res <- get_slurm_out(sjob, outtype = "raw", wait = TRUE)
cat("result:", res, "\n")
`

// TestRslurm runs Debian's R rslurm 0.6, unmodified, as nobody, against
// troupe's Slurm commands: one function call on the cluster, its result
// read back.
func TestRslurm(t *testing.T) {
	needRunc(t)
	rs, err := exec.LookPath("Rscript")
	if err != nil || exec.Command(rs, "-e", "library(rslurm)").Run() != nil {
		t.Skip("SKIP: R's rslurm is not installed (apt-get install r-cran-rslurm; contrib/dev/install-deps does)")
	}
	c := startCluster(t, 1, "2")
	base := searchable(t)
	dir := dirOf(t, nobodyUser, 0o755, base, "r")
	links := slurmLinks(t, filepath.Join(dir, ".troupe"))
	if err := os.WriteFile(filepath.Join(dir, "run.R"), []byte(rscript), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := c.toolAsNobody(t, 5*time.Minute, dir, links, rs, "run.R")
	log, _ := os.ReadFile(filepath.Join(dir, "_rslurm_rtest", "slurm_0.out"))
	if err != nil || !strings.Contains(string(out), "result: 42 \n") {
		t.Fatalf("Rscript: %v\n%s\njob output:\n%s", err, out, log)
	}
	// get_slurm_out's blocking sbatch (--wait, --dependency=singleton,
	// --output=/dev/null) must have succeeded: R warns when it does not.
	if strings.Contains(string(out), "had status") {
		t.Errorf("Rscript: a command failed:\n%s", out)
	}
	acct, _, _ := c.slurmAs(t, nobodyUser, links, dir, "", "sacct", "-X", "-P", "-n", "--format=JobName,State", "--name", "rtest")
	if strings.Count(acct, "rtest|COMPLETED\n") < 1 || strings.Contains(acct, "FAILED") {
		t.Errorf("sacct --name rtest: %q, want the call and get_slurm_out's wait COMPLETED", acct)
	}
}
