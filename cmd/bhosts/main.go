// Command bhosts lists the nodes schedd knows, as LSF's bhosts and Slurm's
// sinfo -N do.
package main

import (
	"io"
	"os"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
)

const prog = "bhosts"

var command = cli.Command{
	Name: prog,
	Summary: "List nodes with their state (UP, DOWN, DRAINING, DRAINED), allocated and total CPU\n" +
		"cores, memory (GiB) and GPUs, labels, partitions, and why a node is drained or down.",
	Examples: []string{
		"bhosts",
		"bhosts -l          # per GPU device: allocated, free, which jobs",
		"bhosts -o json | jq '.[] | select(.state == \"DOWN\") | .name'",
		"bhosts -o json | jq -r '.[] | select(.drain) | \"\\(.name): \\(.reason)\"'",
	},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	long := fs.Bool("l", false, "long format: each node's details and, per GPU device, the share allocated\nand free and the jobs holding it (a request of gpu ≤ 1 must fit one device's free share)")
	fs.OutputFlag()
	pos, err := fs.Parse(args)
	if err != nil {
		return fs.Exit(err)
	}
	if len(pos) > 0 {
		return fs.UsageError("unexpected argument %q", pos[0])
	}
	c, err := fs.Client()
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	list, err := c.Nodes(ctx)
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	nodes := cli.SortNodes(list.Nodes)
	if nodes == nil {
		nodes = []api.Node{}
	}
	if fs.Format() == cli.FormatJSON {
		err = cli.WriteJSON(stdout, nodes)
	} else if *long {
		err = cli.WriteHostsLong(stdout, nodes, time.Local)
	} else {
		err = cli.WriteHosts(stdout, nodes)
	}
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	return cli.ExitOK
}
