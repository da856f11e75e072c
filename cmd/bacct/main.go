// Command bacct sums ended jobs per user, account or partition: jobs,
// completed and failed, queue wait, run time, CPU time and GPU hours,
// between two dates, as LSF's bacct and Slurm's sreport do.
package main

import (
	"io"
	"net/url"
	"os"
	"time"

	"github.com/troupe-hpc/troupe/internal/cli"
)

const prog = "bacct"

var command = cli.Command{
	Name: prog,
	Summary: "Sum ended jobs per user (or account, or partition): jobs, completed, failed, average\n" +
		"queue wait and run time, total run time, CPU time and GPU hours. By default your own\n" +
		"jobs; -u all for every user's. Reads schedd's accounting store.",
	Examples: []string{
		"bacct",
		"bacct -u all -g account --since 2026-11-01 --until 2026-12-01",
		"bacct -u all -g partition -p gpu -o json",
	},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	fs.OutputFlag()
	userName := fs.String("u", "", "sum the jobs of `user` (\"all\": every user's)")
	group := fs.String("g", "user", "one row per `group`: user, account or partition")
	filter := cli.EndedFilterFlags(fs)
	pos, err := fs.Parse(args)
	if err != nil {
		return fs.Exit(err)
	}
	if len(pos) > 0 {
		return fs.UsageError("unexpected argument %q: bacct takes flags only", pos[0])
	}
	switch *group {
	case "user", "account", "partition":
	default:
		return fs.UsageError("-g %s: want user, account or partition", *group)
	}
	q := url.Values{"group": {*group}}
	switch *userName {
	case "all":
	case "":
		q.Set("user", cli.CurrentUser())
	default:
		q.Set("user", *userName)
	}
	if err := filter.Query(q, time.Now()); err != nil {
		return fs.UsageError("%v", err)
	}
	c, err := fs.Client()
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	a, err := c.Accounting(ctx, q)
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	if fs.Format() == cli.FormatJSON {
		err = cli.WriteJSON(stdout, a)
	} else {
		err = cli.WriteAccounting(stdout, a)
	}
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	return cli.ExitOK
}
