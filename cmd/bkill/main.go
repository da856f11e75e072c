// Command bkill cancels jobs, as LSF's bkill and Slurm's scancel do.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
	"golang.org/x/sys/unix"
)

const prog = "bkill"

var command = cli.Command{
	Name:     prog,
	Synopsis: "[JOBID...]",
	Summary: "Cancel jobs: a pending job leaves the queue, a running one has its containers\n" +
		"stopped; either ends CANCELLED. Ids that fail are reported; the others are still\n" +
		"cancelled, and the exit status is 1. With -u, -t, -p or -J the jobs are chosen\n" +
		"from the queue (your own unless -u says otherwise); with ids as well, only the\n" +
		"ids that match are cancelled, as scancel does.",
	Examples: []string{
		"bkill 42",
		"bkill 42 43 44",
		"bkill -t PEND               # all my pending jobs",
		"bkill -u alice -p gpu       # all of alice's jobs in partition gpu",
	},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	userName := fs.String("u", "", "cancel the jobs of `user` (\"all\": everyone's jobs you may cancel)")
	states := fs.String("t", "", "cancel only jobs in these `states` (comma-separated: PENDING, HELD, RUNNING, …,\nLSF's PEND, RUN or Slurm's PD, R)")
	fs.Alias("state", "t")
	partition := fs.String("p", "", "cancel only jobs in these `partitions` (comma-separated)")
	fs.Alias("partition", "p")
	name := fs.String("J", "", "cancel only jobs with this `name`")
	fs.Alias("name", "J")
	signal := fs.String("s", "", "`signal` to send; only KILL or TERM (cancel the job), for schedd's kill takes\nno signal yet")
	fs.Alias("signal", "s")
	pos, err := fs.Parse(args)
	if err != nil {
		return fs.Exit(err)
	}
	ids := make([]uint64, len(pos))
	for i, s := range pos {
		if ids[i], err = cli.ParseJobID(s); err != nil {
			return fs.UsageError("%v", err)
		}
	}
	filter := cli.JobFilter{Partitions: cli.SplitList(*partition)}
	if *name != "" {
		filter.Names = []string{*name}
	}
	if *states != "" {
		if filter.States, err = cli.ParseStates(*states); err != nil {
			return fs.UsageError("-t: %v", err)
		}
	}
	selecting := *userName != "" || *states != "" || *partition != "" || *name != ""
	if len(ids) == 0 && !selecting {
		return fs.UsageError("missing job id (or -u, -t, -p, -J to choose jobs)")
	}
	if *signal != "" {
		if err := checkSignal(*signal); err != nil {
			return cli.Fail(stderr, prog, err)
		}
	}
	c, err := fs.Client()
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	if selecting {
		if *userName != "" {
			filter.Users = []string{*userName}
		} else {
			filter.Users = []string{currentUser()}
		}
		list, err := c.Jobs(ctx, 0, 0)
		if err != nil {
			return cli.Fail(stderr, prog, err)
		}
		ids = pick(cli.SortJobs(filter.Filter(list.Jobs)), ids)
		if len(ids) == 0 {
			return cli.Fail(stderr, prog, errors.New("no job matches"))
		}
	}
	code := cli.ExitOK
	for _, id := range ids {
		_, err := c.Kill(ctx, id)
		switch {
		case err == nil:
			fmt.Fprintf(stdout, "Job <%d> is being terminated.\n", id)
		case errors.Is(err, client.ErrUnreachable), ctx.Err() != nil:
			// The rest would fail the same way.
			return cli.Fail(stderr, prog, err)
		case client.IsNotFound(err):
			code = cli.Fail(stderr, prog, fmt.Errorf("job %d: not found", id))
		default: // schedd's refusal names the job already
			code = cli.Fail(stderr, prog, err)
		}
	}
	return code
}

// pick returns the ids of jobs, or those of ids among them when ids are
// given.
func pick(jobs []api.Job, ids []uint64) []uint64 {
	var out []uint64
	for _, j := range jobs {
		if len(ids) == 0 {
			out = append(out, j.ID)
			continue
		}
		for _, id := range ids {
			if id == j.ID {
				out = append(out, id)
				break
			}
		}
	}
	return out
}

// checkSignal accepts a signal name or number and refuses all but the
// ones that mean "cancel": POST /v1/jobs/{id}/kill carries no signal.
func checkSignal(s string) error {
	var sig syscall.Signal
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		sig = syscall.Signal(n)
	} else {
		name := strings.ToUpper(s)
		if !strings.HasPrefix(name, "SIG") {
			name = "SIG" + name
		}
		if sig = unix.SignalNum(name); sig == 0 {
			return fmt.Errorf("-s %s: unknown signal", s)
		}
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		return nil
	}
	return fmt.Errorf("-s %s: cannot send %s: schedd's kill (POST /v1/jobs/{id}/kill) takes no signal, it only cancels; use -s KILL or TERM, or none", s, unix.SignalName(sig))
}

func currentUser() string {
	if u, err := user.LookupId(strconv.Itoa(os.Getuid())); err == nil {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Getuid())
}
