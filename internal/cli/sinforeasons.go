package cli

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// SinfoReasonFormat is sinfo -R's (--list-reasons) format, Slurm's: the
// reason, who set it and when, and the nodes.
const SinfoReasonFormat = "%20E %9u %19H %N"

// nodeReason is why a node is out of service as sinfo -R shows it.
type nodeReason struct{ why, by, at string }

// reasonOf is n's reason, "" for a node in service: an admin's drain or
// the node's failing health check (by "healthcheck"), or a DOWN node's
// "Not responding" (by slurm, as Slurm says, since the controller set
// it).
func reasonOf(n api.Node) nodeReason {
	stamp := func(t time.Time) string {
		if t.IsZero() {
			return "Unknown"
		}
		return t.Local().Format("2006-01-02T15:04:05")
	}
	switch {
	case n.Drain:
		return nodeReason{why: n.Reason, by: n.DrainedBy, at: stamp(n.DrainedAt)}
	case n.State == api.NodeDown:
		return nodeReason{why: cmp.Or(n.Reason, "Not responding"), by: "slurm", at: stamp(n.LastHeartbeat)}
	}
	return nodeReason{}
}

// sinfoReason is the reason of a row's first node (the rows of
// SinfoReasonRows share one).
func sinfoReason(r SinfoRow) nodeReason {
	if len(r.Info) == 0 {
		return nodeReason{}
	}
	return reasonOf(r.Info[0])
}

// SinfoReasonRows are sinfo -R's rows: the nodes out of service (drained
// by an admin or their health check, or DOWN), one row per reason, user
// and time, in the order of their first node's name.
func SinfoReasonRows(nodes []api.Node) []SinfoRow {
	nodes = slices.Clone(nodes)
	slices.SortFunc(nodes, func(a, b api.Node) int { return strings.Compare(a.Name, b.Name) })
	var rows []SinfoRow
	at := map[nodeReason]int{}
	for _, n := range nodes {
		r := reasonOf(n)
		if r == (nodeReason{}) {
			continue
		}
		k, ok := at[r]
		if !ok {
			k = len(rows)
			at[r] = k
			rows = append(rows, SinfoRow{State: SinfoNodeState(n)})
		}
		rows[k].Nodes = append(rows[k].Nodes, n.Name)
		rows[k].Info = append(rows[k].Info, n)
	}
	return rows
}
