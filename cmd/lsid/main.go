// Command lsid names the cluster and its master, as LSF's lsid does, for
// tools that probe for LSF before they submit.
package main

import (
	"io"
	"os"

	"github.com/troupe-hpc/troupe/internal/cli"
)

const prog = "lsid"

var command = cli.Command{
	Name: prog,
	Summary: "Show the cluster's name ($" + cli.EnvCluster + ", else " + cli.DefaultCluster + ") and its master (the host\n" +
		"schedd answers at), as LSF's lsid does. It asks schedd nothing.",
	Examples: []string{"lsid", "TROUPE_CLUSTER=hpc1 lsid"},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	pos, err := fs.Parse(args)
	if err != nil {
		return fs.Exit(err)
	}
	if len(pos) > 0 {
		return fs.UsageError("unexpected argument %q", pos[0])
	}
	if err := cli.WriteLSID(stdout, cli.ClusterName(), cli.MasterName(fs.Addr())); err != nil {
		return cli.Fail(stderr, prog, err)
	}
	return cli.ExitOK
}
