package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/jobspec/script"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// EnvScriptImage names the site's image for script jobs, as bsub's.
const EnvScriptImage = "TROUPE_SCRIPT_IMAGE"

// sbatchOwn are sbatch's options that are not job options; the job
// options are jobspec/script's table, which #SBATCH lines use too.
var sbatchOwn = []option{
	{0, "wrap", true},
	{0, "parsable", false},
	{'Q', "quiet", false},
	{'W', "wait", false},
	{'h', "help", false},
	{0, "usage", false},
	{'V', "version", false},
	{'v', "verbose", false},
}

// sbatchHelp is what -h lists.
var sbatchHelp = []string{
	"-J, --job-name=NAME       name of the job (default: the script's file name)",
	"-o, --output=PATTERN      output file (%j or %J job id, %x name, %N host; default slurm-%j.out)",
	"-e, --error=PATTERN       error file (default: with the output)",
	"-p, --partition=NAME      partition",
	"-A, --account=NAME        account charged",
	"-q, --qos=NAME            quality of service (partitions.hcl qos)",
	"    --reservation=NAME    run in reservation NAME: on its nodes, while its window is open",
	"-n, --ntasks=N            tasks (of -c cores each)",
	"-N, --nodes=N             nodes: troupe's containers, a multi-node session",
	"-c, --cpus-per-task=N     cores per task",
	"    --ntasks-per-node=N   tasks per container",
	"    --mem=SIZE            memory per container (MB unless K, M, G, T)",
	"    --mem-per-cpu=SIZE    memory per core",
	"-t, --time=LIMIT          wall time: minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]",
	"-D, --chdir=DIR           run in DIR (default: this directory)",
	"    --export=ALL|NONE|VARS  environment passed (default ALL)",
	"-d, --dependency=LIST     afterok:ID[:ID], afterany, afternotok, after",
	"-H, --hold                submit held",
	"    --gres=gpu:N, --gpus-per-node=N  GPUs per container",
	"    --signal=[B:]SIG[@SECONDS]  send SIG that long (default 60) before the time limit",
	"                          and when preempted: every container gets it; with B: main1 only",
	"-L, --licenses=NAME[:N],...  licenses held while the job runs (all of them)",
	"    --exclusive, --comment, --no-requeue, --mail-type, ...  accepted",
	"    --wrap=COMMAND        run COMMAND (by /bin/sh) as the script",
	"    --parsable            print only the job id",
	"-W, --wait                wait until the job ends; exit with its exit code",
	"-Q, --quiet               print nothing but errors",
}

// sbatch submits a batch script as Slurm's sbatch does: options from the
// command line win over the script's #SBATCH lines, both read through
// jobspec/script's one table.
func sbatch(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const prog = "sbatch"
	opts, rest, err := getopt(args, sbatchOwn, true, func(name string) (string, bool, bool) {
		long, ok, arg := script.SlurmOption(name)
		return long, ok, arg
	})
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\nTry \"sbatch --help\" for more information\n", prog, err)
		return 1
	}
	var (
		wrap                     *string
		parsable, quiet, waitEnd bool
		jobOpts                  []given
	)
	for _, o := range opts {
		switch o.name {
		case "wrap":
			v := o.value
			wrap = &v
		case "parsable":
			parsable = true
		case "quiet":
			quiet = true
		case "wait":
			waitEnd = true
		case "verbose":
		case "help", "usage":
			return usage(stdout, prog, "[OPTIONS...] [SCRIPT [ARGS...]] | --wrap=COMMAND", sbatchHelp)
		case "version":
			fmt.Fprintln(stdout, version)
			return 0
		default:
			jobOpts = append(jobOpts, o)
		}
	}

	// The script: --wrap's command, a file (/dev/stdin too) or stdin.
	var (
		src  []byte
		name string
	)
	switch {
	case wrap != nil:
		if len(rest) > 0 {
			return fail(stderr, prog, "Script arguments not permitted with --wrap option")
		}
		src = []byte("#!/bin/sh\n# This script was created by sbatch --wrap.\n\n" + *wrap + "\n")
		name = "wrap"
	case len(rest) > 0 && rest[0] == "/dev/stdin" && stdin != nil:
		// Read what is already open: reopening /dev/stdin fails for a
		// pipe another user created.
		if src, err = io.ReadAll(stdin); err != nil {
			return fail(stderr, prog, "reading the script from /dev/stdin: %v", err)
		}
		name = "stdin"
		rest = rest[1:]
	case len(rest) > 0:
		if src, err = os.ReadFile(rest[0]); err != nil {
			return fail(stderr, prog, "Unable to open file %s", rest[0])
		}
		name = filepath.Base(rest[0])
		rest = rest[1:]
	default:
		if stdin == nil {
			return fail(stderr, prog, "Batch script is empty!")
		}
		if src, err = io.ReadAll(stdin); err != nil {
			return fail(stderr, prog, "reading the script from standard input: %v", err)
		}
		name = "sbatch"
	}
	if len(bytes.TrimSpace(src)) == 0 {
		return fail(stderr, prog, "Batch script is empty!")
	}
	if !bytes.HasPrefix(src, []byte("#!")) {
		return fail(stderr, prog, "This does not look like a batch script.  The first\n"+
			"%s: error: line must start with #! followed by the path to an interpreter.\n"+
			"%s: error: For instance: #!/bin/sh", prog, prog)
	}
	s, err := script.Parse(src)
	if err != nil {
		return fail(stderr, prog, "%s: %v", name, err)
	}
	o := s.Options
	for _, g := range jobOpts {
		if err := o.SetSlurm(g.name, g.value); err != nil {
			return fail(stderr, prog, "%v", err)
		}
	}
	if o.Output == "" {
		o.Output = "slurm-%j.out" // Slurm's default, stderr with it
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	spec, err := o.Job(script.Submit{Cwd: cwd, Environ: os.Environ(), DefaultImage: os.Getenv(EnvScriptImage),
		Script: s, Name: name, Args: rest})
	for _, w := range o.Warnings {
		where := name
		if w.Line == 0 {
			where = "command line"
		}
		fmt.Fprintf(stderr, "%s: warning: %s: %s\n", prog, where, w)
	}
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	if diags := spec.Validate(); diags.HasErrors() {
		return fail(stderr, prog, "%s", diags[0].Summary+diagDetail(diags[0].Detail))
	}
	req := api.SubmitRequest{Spec: wire.ToAPI(*spec), Cwd: cwd, Source: "sbatch " + name, Hold: o.Hold, DependsOn: o.Depend}
	req.UID, req.GID = os.Getuid(), os.Getgid()
	req.User = os.Getenv("USER")
	if u, err := user.LookupId(strconv.Itoa(req.UID)); err == nil {
		req.User = u.Username
	}
	if req.User == "" {
		req.User = strconv.Itoa(req.UID)
	}
	c, err := newClient(prog, stderr)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	if o.Singleton {
		l, err := c.Jobs(ctx, 0, 0)
		if err != nil {
			return fail(stderr, prog, "--dependency=singleton: listing your jobs: %v", err)
		}
		req.DependsOn = cli.SingletonDependency(l.Jobs, req.User, spec.Name)
	}
	resp, err := c.Submit(ctx, req)
	if err != nil {
		return fail(stderr, prog, "Batch job submission failed: %v", err)
	}
	switch {
	case parsable:
		fmt.Fprintf(stdout, "%d\n", resp.JobID)
	case !quiet:
		fmt.Fprintf(stdout, "Submitted batch job %d\n", resp.JobID)
	}
	if !waitEnd {
		return 0
	}
	return waitFor(ctx, prog, c, resp.JobID, stderr)
}

func diagDetail(d string) string {
	if d == "" {
		return ""
	}
	return ": " + d
}

// sbatchClient is what waitFor needs of the client.
type sbatchClient interface {
	Job(ctx context.Context, id uint64, index uint64, wait time.Duration) (api.Job, uint64, error)
}

// waitFor follows job id until it ends (sbatch --wait): 0 when it
// COMPLETED, its exit code when it FAILED with one, else 1, as sbatch.
func waitFor(ctx context.Context, prog string, c sbatchClient, id uint64, stderr io.Writer) int {
	var index uint64
	misses := 0
	for {
		j, next, err := c.Job(ctx, id, index, 30*time.Second)
		if ctx.Err() != nil {
			return 130
		}
		if err != nil {
			misses++
			if misses > 20 {
				return fail(stderr, prog, "job %d: %v", id, err)
			}
			time.Sleep(time.Second)
			index = 0
			continue
		}
		misses = 0
		if j.State.Terminal() {
			switch {
			case j.State == api.JobCompleted:
				return 0
			case j.ExitCode > 0 && j.ExitCode < 256:
				return j.ExitCode
			}
			fmt.Fprintf(stderr, "%s: error: Job %d %s\n", prog, id, j.State)
			return 1
		}
		if next == index {
			time.Sleep(time.Second)
		}
		index = next
	}
}
