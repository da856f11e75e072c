package cli

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
)

// ErrHostSelection is a -m naming hosts where a command takes only the
// cluster's name: troupe places jobs by partition, not on hosts the
// submitter names, and acts on jobs by id or by the selection flags.
var ErrHostSelection = errors.New("troupe places jobs by partition (-q), not on named hosts")

// Hosts is LSF's -m: host and cluster names, separated by spaces in one
// argument ("node01 node02", "troupe"). A name equal to the cluster's
// (ClusterName, what lsid and lsclusters print) stands for the whole
// cluster: no restriction at all.
type Hosts struct {
	names []string
	whole bool // a name is the cluster's
}

// ParseHosts reads -m's value; an empty one is an error.
func ParseHosts(v string) (Hosts, error) {
	names := strings.Fields(v)
	if len(names) == 0 {
		return Hosts{}, errors.New("-m: want host names or the cluster's name (" + ClusterName() + ")")
	}
	return Hosts{names: names, whole: slices.Contains(names, ClusterName())}, nil
}

// Whole reports whether the names cover the whole cluster (or none were
// given: the zero Hosts).
func (h Hosts) Whole() bool { return h.whole || len(h.names) == 0 }

// WholeOnly is nil when the names cover the whole cluster, else an
// ErrHostSelection naming the hosts.
func (h Hosts) WholeOnly() error {
	if h.Whole() {
		return nil
	}
	return fmt.Errorf("-m %s: %w; -m takes only the cluster's name, %q (the whole cluster)", strings.Join(h.names, " "), ErrHostSelection, ClusterName())
}

// Unknown are the names that are neither the cluster's nor one of
// nodes, as LSF reports them: "NAME: Bad host name, host group name or
// cluster name".
func (h Hosts) Unknown(nodes []api.Node) []string {
	var bad []string
	for _, n := range h.names {
		if n == ClusterName() || slices.ContainsFunc(nodes, func(x api.Node) bool { return x.Name == n }) {
			continue
		}
		bad = append(bad, n)
	}
	return bad
}

// Match reports whether j runs on one of the hosts, as LSF's bjobs -m
// shows the jobs dispatched to them: a container of j is placed on one
// of the named nodes. With the whole cluster every job matches; a job
// not placed yet matches no host.
func (h Hosts) Match(j api.Job) bool {
	if h.Whole() {
		return true
	}
	if s := LSFState(j); s == LSFPend || s == LSFPSusp {
		return false
	}
	return slices.ContainsFunc(JobNodes(j), func(n string) bool { return slices.Contains(h.names, n) })
}

// HostsFlag defines LSF's -m on fs with usage; the function it returns
// reads it after fs.Parse (the zero Hosts, the whole cluster, when -m is
// not given; an error for an empty one).
func HostsFlag(fs *FlagSet, usage string) func() (Hosts, error) {
	v := fs.String("m", "", usage)
	return func() (Hosts, error) {
		given := false
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == "m" })
		if !given {
			return Hosts{}, nil
		}
		return ParseHosts(*v)
	}
}

// ControlHostsUsage is -m's usage in bkill, bstop and bresume.
const ControlHostsUsage = "the cluster's `name` (lsid prints it): the whole cluster, as with LSF MultiCluster's\n" +
	"-m CLUSTER; troupe acts on jobs by id or -u/-t/-p/-J, not by the hosts they run on,\n" +
	"so host names are refused"

// WholeClusterOnly reads a HostsFlag that may name only the whole
// cluster: nil when -m is absent or names the cluster.
func WholeClusterOnly(hostsOf func() (Hosts, error)) error {
	h, err := hostsOf()
	if err != nil {
		return err
	}
	return h.WholeOnly()
}
