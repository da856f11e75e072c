// Command lsclusters lists the cluster as LSF's lsclusters does: its
// name, status, master, admin and hosts, for tools that read the
// cluster's name from it (Snakemake's LSF plugin).
package main

import (
	"io"
	"os"

	"github.com/troupe-hpc/troupe/internal/cli"
)

const prog = "lsclusters"

var command = cli.Command{
	Name: prog,
	Summary: "Show the cluster as LSF's lsclusters does: CLUSTER_NAME ($" + cli.EnvCluster + ", else " + cli.DefaultCluster + "),\n" +
		"STATUS, MASTER_HOST (the host schedd answers at), ADMIN, and HOSTS and SERVERS (the\n" +
		"nodes schedd knows).",
	Examples: []string{"lsclusters", "lsclusters -noheader | awk '{print $1}'"},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	noHeader := fs.Bool("noheader", false, "no header line")
	fs.Bool("w", false, "wide format: accepted (no field is ever cut)")
	pos, err := fs.Parse(args)
	if err != nil {
		return fs.Exit(err)
	}
	if len(pos) > 0 && !(len(pos) == 1 && pos[0] == cli.ClusterName()) {
		return fs.UsageError("unknown cluster %q: this is %s", pos[0], cli.ClusterName())
	}
	c, err := fs.Client()
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	if err := cli.WriteLSClusters(stdout, cli.ClusterName(), cli.MasterName(fs.Addr()), nodes.Nodes, !*noHeader); err != nil {
		return cli.Fail(stderr, prog, err)
	}
	return cli.ExitOK
}
