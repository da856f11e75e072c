package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
)

var sinfoOpts = []option{
	{'h', "noheader", false}, {'o', "format", true}, {'N', "Node", false}, {'p', "partition", true},
	{'a', "all", false}, {'l', "long", false}, {'v', "verbose", false}, {0, "help", false}, {0, "usage", false},
	{'s', "summarize", false}, {'O', "Format", true}, {'M', "clusters", true}, {'R', "list-reasons", false},
	{'T', "reservation", false},
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
		reasons     bool
		partsWanted []string
		resv        bool
	)
	for _, o := range opts {
		switch o.name {
		case "noheader":
			header = false
		case "format":
			format = o.value
		case "Format":
			if format, err = cli.SinfoLongFormat(o.value); err != nil {
				return fail(stderr, prog, "%v", err)
			}
		case "Node":
			byNode = true
		case "partition":
			partsWanted = list(partsWanted, o.value)
		case "list-reasons":
			reasons = true
		case "summarize":
			format = "%#P %.5a %.10l %.6D %N"
		case "reservation":
			resv = true
		case "help", "usage":
			return usage(stdout, prog, "[OPTIONS...]", []string{
				"-h, --noheader        no header",
				"-o, --format=FORMAT   fields %P (default starred) %R %a %l %D %t %T %N %n %F %C %c %f %G, %[.][width|#]X",
				"-O, --Format=FIELDS   fields by name, each FIELD[:[.][SIZE][SUFFIX]]: NodeHost, NodeList, Partition,\n" +
					"                        StateLong, StateCompact, CPUs, CPUsState, Features, Gres, GresUsed, ...",
				"-N, --Node            one line per node",
				"-R, --list-reasons    the nodes out of service and why: drained (by an admin or a failing health check) or down",
				"-p, --partition=LIST  these partitions",
				"-T, --reservation     the reservations: name, state, window, nodes",
			})
		}
	}
	if format == "" && reasons {
		format = cli.SinfoReasonFormat
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
	if resv {
		l, err := c.Reservations(ctx)
		if err == nil {
			err = cli.WriteSinfoReservations(stdout, l.Reservations, header)
		}
		if err != nil {
			return fail(stderr, prog, "%v", err)
		}
		return 0
	}
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
	rows := cli.SinfoRows(ps, nodes.Nodes, byNode)
	if reasons {
		rows = cli.SinfoReasonRows(nodes.Nodes)
	} else if !slices.ContainsFunc([]string{"P", "R"}, func(c string) bool { return hasField(format, c) }) {
		rows = mergeRows(rows, byNode, !hasField(format, "t") && !hasField(format, "T"))
	}
	if err := cli.WriteSinfo(stdout, rows, format, header); err != nil {
		return fail(stderr, prog, "%v", err)
	}
	return 0
}

// hasField says whether the -o format shows field letter c.
func hasField(format, c string) bool {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte(".-#0123456789", format[j]) >= 0 {
			j++
		}
		if j < len(format) && string(format[j]) == c {
			return true
		}
		i = j
	}
	return false
}

// mergeRows groups rows as sinfo does when its format shows no
// partition: each node once, in one line per state (one line in all
// when the state is not shown either; with -N one line per node).
func mergeRows(rows []cli.SinfoRow, byNode, allStates bool) []cli.SinfoRow {
	var out []cli.SinfoRow
	seen := map[string]bool{}
	at := map[string]int{}
	for _, r := range rows {
		for i, n := range r.Nodes {
			if seen[n] {
				continue
			}
			seen[n] = true
			key := r.State
			if allStates {
				key = ""
			}
			if byNode {
				out = append(out, cli.SinfoRow{Partition: r.Partition, Walltime: r.Walltime, State: r.State, Nodes: []string{n}, Info: r.Info[i : i+1]})
				continue
			}
			k, ok := at[key]
			if !ok {
				k = len(out)
				at[key] = k
				out = append(out, cli.SinfoRow{Partition: r.Partition, Walltime: r.Walltime, State: r.State})
			}
			out[k].Nodes = append(out[k].Nodes, n)
			out[k].Info = append(out[k].Info, r.Info[i])
		}
	}
	for k := range out {
		idx := make([]int, len(out[k].Nodes))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int { return strings.Compare(out[k].Nodes[a], out[k].Nodes[b]) })
		nodes, info := make([]string, len(idx)), make([]api.Node, len(idx))
		for i, j := range idx {
			nodes[i], info[i] = out[k].Nodes[j], out[k].Info[j]
		}
		out[k].Nodes, out[k].Info = nodes, info
	}
	if byNode {
		slices.SortStableFunc(out, func(a, b cli.SinfoRow) int { return strings.Compare(a.Nodes[0], b.Nodes[0]) })
	}
	return out
}
