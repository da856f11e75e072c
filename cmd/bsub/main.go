// Command bsub submits a job file, an LSF or Slurm script, or a command
// line to schedd, as LSF's bsub does.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/backoff"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

const prog = "bsub"

var command = cli.Command{
	Name:     prog,
	Synopsis: "JOBFILE... | SCRIPT [ARG...] | COMMAND [ARG...] | < SCRIPT | -I JOBFILE [-- COMMAND [ARG...]]",
	Summary: "Submit the job described by JOBFILE (HCL, see troupe-job(5)) and print its id.\n" +
		"A script (#! or #BSUB/#SBATCH lines), a script on stdin, or a command line (run by /bin/sh -c)\n" +
		"is submitted as LSF does: as you, in this directory (-cwd), with your environment (-env), on\n" +
		"the host image; -n is then slots, with LSF's -R, -M, -G (troupe-job(5), SCRIPT JOBS).\n" +
		"Several job files, or --count N copies, are submitted in one request: all of them or none.\n" +
		"With --wait, wait until the job ends and exit with its exit code. With -I, run main1's\n" +
		"command (COMMAND, else the file's, else a shell) on a terminal connected to this one.",
	Examples: []string{
		"bsub train.hcl",
		"bsub -n 4 -W 10 -o 'logs/%J.out' python train.py   # a command line, LSF-style",
		"bsub < job.lsf                              # a #BSUB script on stdin",
		"bsub -q short run.sbatch a1                 # a #SBATCH script, with arguments",
		"bsub -q gpu -n 8 -W 4:00 -J big train.hcl   # LSF-style overrides of the file",
		"bsub --env EPOCHS=20 -o 'train-%J.out' train.hcl",
		"bsub -H train.hcl                           # submit held; brelease starts it",
		"bsub a.hcl b.hcl c.hcl                      # three jobs, one request",
		"bsub --count 100 sim.hcl                    # 100 separate jobs of one file, one request",
		"bsub -J 'sweep[1-100%10]' sweep.hcl         # a job array: 100 elements, 10 at a time",
		"bsub --array 1-100:2%10 -o 'out.%I' sweep.sh # Slurm's syntax; %I is the element's index",
		"bsub -w 'done(12)' post.hcl                 # start once job 12 COMPLETED",
		"bsub -w afterok:12:13,afterany:14 post.hcl  # Slurm's --dependency syntax",
		"bsub --dry-run -q gpu train.hcl             # check, show, submit nothing",
		"bsub -K train.hcl && echo done      # wait; exit status is the job's",
		"bsub -I dev.hcl                             # a shell in main1; ssh sub1 from there",
		"bsub -I dev.hcl -- mpirun -np 4 ./a.out     # one command, on a terminal",
		"bsub --addr unix:///run/troupe/schedd.sock train.hcl",
	},
}

func main() {
	oneP()
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// oneP runs bsub's goroutines on one P unless GOMAXPROCS says otherwise:
// a submission waits on one request at a time, and with more Ps the
// runtime wakes threads to run the HTTP client's goroutines in parallel,
// which a process that lives a few milliseconds pays for and gains
// nothing from (0.2 ms of its 3.5 ms of CPU a run on the development
// machine; docs/pipeline.md, One bsub per job). The goroutines still run
// concurrently: --wait, -I and the signal handling are unchanged.
func oneP() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	wait := fs.Bool("wait", false, "wait until the job ends; exit 0 if it COMPLETED, its exit code if it FAILED,\n1 if it was CANCELLED, timed out or lost its node")
	fs.Alias("K", "wait")
	hold := fs.Bool("H", false, "submit the job held: it waits HELD, never started, until brelease")
	fs.Alias("hold", "H")
	depend := fs.String("w", "", "start only once other jobs reach a state: LSF's 'done(12) && ended(13)' (also exit(),\n"+
		"started(), || for any), or Slurm's afterok:12:13,afterany:14 (afternotok, after; '?' for any)")
	fs.Alias("dependency", "w")
	inter := fs.Bool("I", false, "interactive: run main1's command (COMMAND after --, else the file's, else\n"+
		"/bin/sh) on a terminal connected to this one, as LSF's bsub -Is and srun --pty do; exit\n"+
		"with its status. Ctrl-] detaches (the job goes on; battach comes back)")
	fs.Alias("Is", "I")
	fs.Alias("interactive", "I")
	vars := varFlag{}
	fs.Var(vars, "var", "set the job file's `name=value` variable (repeatable), as terraform -var does")
	var ov overrides
	ov.define(fs)
	defineLSF(fs)
	hostsOf := cli.HostsFlag(fs, "the cluster's `name` (lsid prints it): the whole cluster, as LSF MultiCluster's -m CLUSTER;\n"+
		"troupe places a job by partition (-q), so host names are refused")
	count := fs.Int("count", 1, "submit `N` copies of the job, as N separate jobs in one request (a job array,\n-J 'name[1-N]', is one job of N elements and usually the better choice)")
	dry := &dryRunFlag{}
	fs.Var(dry, "dry-run", "parse, apply the overrides and validate, then show what would be submitted and\n"+
		"the partition's verdict; submit nothing (--dry-run=json: as JSON)")
	// Flags stop at the first argument: what follows a command is its own.
	if err := fs.FlagSet.Parse(args); err != nil {
		return fs.Exit(err)
	}
	var (
		dep *api.Dependency
		err error
	)
	if *depend != "" {
		if dep, err = api.ParseDependency(*depend); err != nil {
			return fs.UsageError("-w: %v", err)
		}
	}
	if dry.on && *wait {
		return fs.UsageError("--dry-run submits nothing for --wait to wait for")
	}
	if *inter && (*wait || *hold) {
		return fs.UsageError("-I waits on its own and cannot be held: drop --wait and -H")
	}
	if *count < 1 || *count > maxCount {
		return fs.UsageError("--count %d: want 1 to %d", *count, maxCount)
	}
	w, err := classify(fs.Args(), stdin, stdinIsTerminal(stdin))
	var ue usageError
	if errors.As(err, &ue) {
		return fs.UsageError("%s", ue.msg)
	}
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	var pos []string
	if w.jobFile != "" && len(fs.Args()) > 0 {
		// A job file may be followed by flags (and -I's -- COMMAND).
		if pos, err = fs.Parse(fs.Args()[1:]); err != nil {
			return fs.Exit(err)
		}
		pos = append([]string{w.jobFile}, pos...)
	} else {
		pos = []string{w.source}
	}
	files := pos[:1]
	if w.jobFile != "" && !*inter {
		files = pos // bsub a.hcl b.hcl: one request
	}
	if n := len(files) * *count; n > 1 {
		switch {
		case *inter:
			return fs.UsageError("-I runs one job on this terminal: drop --count")
		case *wait:
			return fs.UsageError("--wait waits for one job, not %d: submit them, then follow them with bjobs", n)
		case dry.on:
			return fs.UsageError("--dry-run checks one job, not %d: check each file on its own", n)
		}
	}
	if given := lsfOnlyGiven(fs); w.jobFile != "" && len(given) > 0 {
		return fs.UsageError("%s: for scripts and command lines; a job file says this itself (see troupe-job(5))", strings.Join(given, " "))
	}
	if err := cli.WholeClusterOnly(hostsOf); err != nil {
		return fs.UsageError("%v", err)
	}
	ov.parsed(fs)

	var (
		specs     []*jobspec.Job // one per file
		singleton bool           // #SBATCH --dependency=singleton
	)
	if w.jobFile == "" {
		spec, opts, err := scriptJob(fs, w, &ov, stderr)
		if err != nil {
			return cli.Fail(stderr, prog, fmt.Errorf("%s: %w", w.source, err))
		}
		if dep == nil {
			dep = opts.Depend
			singleton = opts.Singleton
		}
		*hold = *hold || opts.Hold
		specs = []*jobspec.Job{spec}
	} else {
		for i, file := range files {
			src := w.src
			if i > 0 {
				src = nil
			}
			spec, code := jobFile(file, src, vars, *inter, stderr)
			if spec == nil {
				return code
			}
			if err := ov.apply(spec); err != nil {
				return cli.Fail(stderr, prog, err)
			}
			if *inter {
				interactiveCommand(spec, pos[1:])
			}
			specs = append(specs, spec)
		}
	}
	spec := specs[0]
	if singleton && *count > 1 {
		return fs.UsageError("--dependency=singleton runs one job of a name at a time: drop --count")
	}

	c, err := fs.Client()
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	var reqs []api.SubmitRequest
	for i, sp := range specs {
		req, err := request(*sp, files[i])
		if err != nil {
			return cli.Fail(stderr, prog, err)
		}
		req.Hold, req.DependsOn, req.Interactive = *hold, dep, *inter
		for range *count {
			reqs = append(reqs, req)
		}
	}
	if len(reqs) > 1 {
		ctx, stop := cli.SignalContext()
		defer stop()
		return submitMany(ctx, c, reqs, stdout, stderr)
	}
	req := reqs[0]
	ctx, stop := cli.SignalContext()
	defer stop()
	if singleton && dep == nil {
		l, err := c.Jobs(ctx, 0, 0)
		if err != nil {
			return cli.Fail(stderr, prog, fmt.Errorf("--dependency=singleton: listing your jobs: %w", err))
		}
		req.DependsOn = cli.SingletonDependency(l.Jobs, req.User, spec.Name)
	}
	if dry.on {
		return dryRun(ctx, c, req, dry.format, stdout, stderr)
	}
	resp, err := c.Submit(ctx, req)
	if errors.Is(err, client.ErrUnknownOutcome) {
		return cli.Fail(stderr, prog, fmt.Errorf("the job may or may not have been submitted: %w; look for it with bqueue before submitting again", err))
	}
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	if *inter {
		return interactive(ctx, c, resp, stdin, stdout, stderr)
	}
	printSubmitted(stdout, resp)
	if !*wait {
		return cli.ExitOK
	}
	return waitJob(ctx, c, resp, stderr)
}

// maxCount bounds --count: a million jobs is a job array's business.
const maxCount = 100_000

// jobFile reads (unless src is given) and parses the job file at path,
// writing its diagnostics; nil and the exit status when it is no job.
func jobFile(path string, src []byte, vars varFlag, inter bool, stderr io.Writer) (*jobspec.Job, int) {
	if src == nil {
		var err error
		if src, err = os.ReadFile(path); err != nil {
			return nil, cli.Fail(stderr, prog, err)
		}
	}
	parsed, diags := jobspec.ParseWith(path, src, jobspec.Options{Vars: vars, Interactive: inter})
	if len(diags) > 0 {
		if werr := jobspec.WriteDiagnostics(stderr, path, src, diags); werr != nil {
			return nil, cli.Fail(stderr, prog, werr)
		}
	}
	if diags.HasErrors() {
		// hcl's text names "file line N"; add the compiler-style
		// file:line:col that editors jump to, one line per error.
		for _, d := range diags {
			if d.Severity == hcl.DiagError {
				fmt.Fprintf(stderr, "%s: %s\n", prog, position(d, path))
			}
		}
		return nil, cli.ExitFail
	}
	if parsed == nil {
		return nil, cli.Fail(stderr, prog, fmt.Errorf("%s: no job in file", path))
	}
	return parsed, cli.ExitOK
}

// printSubmitted prints the line workflow tools parse, as LSF's bsub does;
// the same for a job array.
func printSubmitted(stdout io.Writer, r api.SubmitResponse) {
	fmt.Fprintf(stdout, "Job <%d> is submitted to partition <%s>.\n", r.JobID, r.Partition)
}

// submitMany submits reqs in batches (POST /v1/jobs/batch, one raft
// entry each), printing a line per job; to a schedd without batches, one
// request per job.
func submitMany(ctx context.Context, c *client.Client, reqs []api.SubmitRequest, stdout, stderr io.Writer) int {
	done := 0
	fail := func(err error) int {
		if done > 0 {
			fmt.Fprintf(stderr, "%s: %d of %d jobs submitted (above); the rest were not\n", prog, done, len(reqs))
		}
		if errors.Is(err, client.ErrUnknownOutcome) {
			err = fmt.Errorf("the jobs of the last request may or may not have been submitted: %w; look for them with bqueue before submitting again", err)
		}
		return cli.Fail(stderr, prog, err)
	}
	for done < len(reqs) {
		chunk := reqs[done:min(done+api.MaxSubmitBatch, len(reqs))]
		res, err := c.SubmitBatch(ctx, chunk)
		if client.IsUnsupported(err) && done == 0 {
			return submitEach(ctx, c, reqs, stdout, stderr)
		}
		if err != nil {
			return fail(err)
		}
		for _, r := range res {
			printSubmitted(stdout, r)
		}
		done += len(chunk)
	}
	return cli.ExitOK
}

// submitEach submits reqs one request each, for a schedd older than
// batches.
func submitEach(ctx context.Context, c *client.Client, reqs []api.SubmitRequest, stdout, stderr io.Writer) int {
	for i, req := range reqs {
		r, err := c.Submit(ctx, req)
		if err != nil {
			if i > 0 {
				fmt.Fprintf(stderr, "%s: %d of %d jobs submitted (above); the rest were not\n", prog, i, len(reqs))
			}
			return cli.Fail(stderr, prog, err)
		}
		printSubmitted(stdout, r)
	}
	return cli.ExitOK
}

// request builds the submission: the spec and who submits it from where.
func request(spec jobspec.Job, path string) (api.SubmitRequest, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return api.SubmitRequest{}, err
	}
	uid, gid := os.Getuid(), os.Getgid()
	name := os.Getenv("USER")
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		name = u.Username
	}
	if name == "" {
		name = strconv.Itoa(uid)
	}
	// The positions of this parse let schedd's refusals name the file's
	// line and column: a few bytes a setting, where sending the file
	// would have schedd parse it again and point at the file for what a
	// flag (-q, -W, -n) changed.
	return api.SubmitRequest{Spec: wire.ToAPI(spec), Cwd: cwd, User: name, UID: uid, GID: gid, Source: path, Positions: wire.PositionsOf(&spec)}, nil
}

// Waiting tolerates schedd being away (a restart) this long.
var (
	unreachableGrace = 2 * time.Minute
	retryDelay       = time.Second
	blockWait        = 30 * time.Second
)

// waitJob follows job id with blocking queries until it ends and returns
// the exit status bsub --wait gives.
func waitJob(ctx context.Context, c *client.Client, sub api.SubmitResponse, stderr io.Writer) int {
	id := sub.JobID
	status := newStatusLine(stderr, id)
	// The first query waits until the peer asked holds the job: reads
	// are served by any peer, and a follower may not have applied it yet.
	index := cli.Before(sub.Index)
	var awaySince time.Time
	for {
		j, next, err := c.Job(ctx, id, index, blockWait)
		switch {
		case ctx.Err() != nil:
			status.done()
			fmt.Fprintf(stderr, "%s: stopped waiting; job %d goes on (bkill %d stops it)\n", prog, id, id)
			return 130
		case errors.Is(err, client.ErrUnreachable), errors.Is(err, client.ErrTimeout), client.IsNotFound(err):
			// The job was acknowledged: "not found" is a follower that has
			// not applied it yet (reads are served by any peer); ask the
			// next one rather than report it missing.
			if client.IsNotFound(err) {
				c.Next()
				index = cli.Before(sub.Index)
			}
			if awaySince.IsZero() {
				awaySince = time.Now()
			}
			if time.Since(awaySince) > unreachableGrace {
				status.done()
				return cli.Fail(stderr, prog, err)
			}
			_ = backoff.Sleep(ctx, retryDelay)
			continue
		case err != nil:
			status.done()
			return cli.Fail(stderr, prog, cli.JobError(id, err))
		}
		awaySince = time.Time{}
		status.show(cli.StateWithReason(j))
		if j.State.Terminal() {
			status.done()
			return exitStatus(j, stderr)
		}
		if next == 0 || next == index {
			// No blocking support or nothing moved: do not spin.
			_ = backoff.Sleep(ctx, retryDelay)
		}
		index = next
	}
}

// exitStatus maps an ended job to bsub --wait's exit status, naming the
// state on stderr when it is not COMPLETED.
func exitStatus(j api.Job, stderr io.Writer) int {
	cause := ""
	if j.Reason != "" {
		cause = " (" + j.Reason + ")"
	}
	switch j.State {
	case api.JobCompleted:
		return cli.ExitOK
	case api.JobFailed:
		code := j.ExitCode
		if code <= 0 || code > 255 {
			code = 1
		}
		fmt.Fprintf(stderr, "%s: job %d %s with exit code %d%s\n", prog, j.ID, j.State, j.ExitCode, cause)
		return code
	}
	fmt.Fprintf(stderr, "%s: job %d %s%s\n", prog, j.ID, j.State, cause)
	return cli.ExitFail
}

// statusLine shows a job's state changes on one line of a terminal:
// "Job 7: PENDING (Resources) → RUNNING". Off a terminal it shows nothing.
type statusLine struct {
	w      io.Writer
	tty    bool
	id     uint64
	states []string
	shown  bool
}

func newStatusLine(w io.Writer, id uint64) *statusLine {
	return &statusLine{w: w, tty: cli.IsTerminal(w), id: id}
}

const statusMax = 100 // characters before older states are elided

func (s *statusLine) show(state string) {
	if n := len(s.states); n > 0 && s.states[n-1] == state {
		return
	}
	s.states = append(s.states, state)
	if !s.tty {
		return
	}
	head := fmt.Sprintf("Job %d: ", s.id)
	line := strings.Join(s.states, " → ")
	for i := 1; len(head)+len(line) > statusMax && i < len(s.states); i++ {
		line = "… → " + strings.Join(s.states[i:], " → ")
	}
	fmt.Fprintf(s.w, "\r%s%s\x1b[K", head, line)
	s.shown = true
}

func (s *statusLine) done() {
	if s.shown {
		fmt.Fprintln(s.w)
		s.shown = false
	}
}

// position is "file:line:col: summary" for d, or "file: summary" when d
// has no position.
func position(d *hcl.Diagnostic, path string) string {
	if d.Subject == nil {
		return fmt.Sprintf("%s: %s", path, d.Summary)
	}
	r := d.Subject
	file := r.Filename
	if file == "" {
		file = path
	}
	return fmt.Sprintf("%s:%d:%d: %s", file, r.Start.Line, r.Start.Column, d.Summary)
}

// varFlag collects -var name=value pairs.
type varFlag map[string]string

func (v varFlag) String() string { return "" }

func (v varFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("-var %q: want name=value", s)
	}
	v[name] = value
	return nil
}
