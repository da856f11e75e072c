// Command bkill cancels jobs, as LSF's bkill and Slurm's scancel do.
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/troupe-hpc/troupe/internal/cli"
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
	sel := cli.SelectFlags(fs, "cancel")
	signal := fs.String("s", "", "`signal` to send; only KILL or TERM (cancel the job), for schedd's kill takes\nno signal yet")
	fs.Alias("signal", "s")
	pos, err := fs.Parse(args)
	if err != nil {
		return fs.Exit(err)
	}
	ids, err := cli.ParseJobIDs(pos)
	if err != nil {
		return fs.UsageError("%v", err)
	}
	if err := sel.Check(); err != nil {
		return fs.UsageError("%v", err)
	}
	if len(ids) == 0 && !sel.Active() {
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
	if sel.Active() {
		if ids, err = sel.Pick(ctx, c, ids); err != nil {
			return cli.Fail(stderr, prog, err)
		}
	}
	return cli.ForEachJob(ctx, stdout, stderr, prog, ids, c.Kill, "Job <%d> is being terminated.\n")
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
