// Command brsvs lists the advance reservations, as LSF's brsvs does.
package main

import (
	"io"
	"os"
	"slices"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
)

const prog = "brsvs"

var command = cli.Command{
	Name:     prog,
	Synopsis: "[-l] [-o json] [RSVID...]",
	Summary: "List the advance reservations in force (badmin reservation create makes them), as LSF's\n" +
		"brsvs does: each one's id, type (sys for a maintenance window, user otherwise), users, the\n" +
		"cores its running jobs use of those it holds, in all and per host, and its time window\n" +
		"(month/day/hour/minute-month/day/hour/minute; hour:minute for a daily one,\n" +
		"day:hour:minute for a weekly one, day 0 Sunday).",
	Examples: []string{
		"brsvs",
		"brsvs -l pm",
		"brsvs -o json | jq -r '.reservations[] | select(.state == \"ACTIVE\") | .name'",
	},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	long := fs.Bool("l", false, "long format: each reservation's status, creator, users, accounts, flags, jobs and window")
	fs.OutputFlag()
	pos, err := fs.Parse(args)
	if err != nil {
		return fs.Exit(err)
	}
	c, err := fs.Client()
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	list, err := c.Reservations(ctx)
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	if len(pos) > 0 {
		list.Reservations = slices.DeleteFunc(list.Reservations, func(r api.Reservation) bool { return !slices.Contains(pos, r.Name) })
	}
	switch {
	case fs.Format() == cli.FormatJSON:
		err = cli.WriteJSON(stdout, list)
	case *long:
		err = cli.WriteBrsvsLong(stdout, list.Reservations)
	default:
		var nodes api.NodeList
		var jobs api.JobList
		if nodes, err = c.Nodes(ctx); err == nil {
			jobs, err = c.Jobs(ctx, 0, 0)
		}
		if err == nil {
			err = cli.WriteBrsvs(stdout, list.Reservations, nodes.Nodes, jobs.Jobs)
		}
	}
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	return cli.ExitOK
}
