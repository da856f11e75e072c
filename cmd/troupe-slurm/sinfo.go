package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
)

var sinfoOpts = []option{
	{'h', "noheader", false}, {'o', "format", true}, {'N', "Node", false}, {'p', "partition", true},
	{'a', "all", false}, {'l', "long", false}, {'v', "verbose", false}, {0, "help", false}, {0, "usage", false},
	{'s', "summarize", false},
}

// sinfo shows the partitions and their nodes as Slurm's sinfo: one line
// per partition and node state, the default partition's name starred.
func sinfo(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	const prog = "sinfo"
	opts, rest, err := getopt(args, sinfoOpts, false, nil)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\nTry \"sinfo --help\" for more information\n", prog, err)
		return 1
	}
	if len(rest) > 0 {
		return fail(stderr, prog, "Unrecognized option: %s", rest[0])
	}
	var (
		header      = true
		format      string
		byNode      bool
		partsWanted []string
	)
	for _, o := range opts {
		switch o.name {
		case "noheader":
			header = false
		case "format":
			format = o.value
		case "Node":
			byNode = true
		case "partition":
			partsWanted = list(partsWanted, o.value)
		case "summarize":
			format = "%#P %.5a %.10l %.6D %N"
		case "help", "usage":
			return usage(stdout, prog, "[OPTIONS...]", []string{
				"-h, --noheader        no header",
				"-o, --format=FORMAT   fields %P (default starred) %R %a %l %D %t %T %N, %[.][width|#]X",
				"-N, --Node            one line per node",
				"-p, --partition=LIST  these partitions",
			})
		}
	}
	if format == "" {
		format = cli.SinfoDefaultFormat
		if byNode {
			format = cli.SinfoNodeFormat
		}
	}
	c, err := newClient(prog, stderr)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	parts, err := c.Partitions(ctx)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	var ps []api.PartitionInfo
	for _, p := range parts.Partitions {
		if len(partsWanted) == 0 || slices.Contains(partsWanted, p.Name) {
			ps = append(ps, p)
		}
	}
	if err := cli.WriteSinfo(stdout, cli.SinfoRows(ps, nodes.Nodes, byNode), format, header); err != nil {
		return fail(stderr, prog, "%v", err)
	}
	return 0
}
