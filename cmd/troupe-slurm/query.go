package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
)

// list splits Slurm's comma-separated option values, each given option
// adding to the list.
func list(dst []string, v string) []string {
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			dst = append(dst, s)
		}
	}
	return dst
}

// jobIDs reads Slurm job ids ("12", "12,13"); an array element
// ("12_3") or a step ("12.0") names its job.
func jobIDs(vals []string) ([]uint64, error) {
	var ids []uint64
	for _, v := range vals {
		base, _, _ := strings.Cut(v, ".")
		base, _, _ = strings.Cut(base, "_")
		id, err := strconv.ParseUint(base, 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("invalid job id: %s", v)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// stateSet reads squeue -t and sacct -s: long or compact names, any
// case; "all" is nil (every state).
func stateSet(vals []string) (map[string]bool, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	long := map[string]string{}
	for _, s := range cli.SlurmStates() {
		long[s] = s
	}
	out := map[string]bool{}
	for _, v := range vals {
		u := strings.ToUpper(v)
		if u == "ALL" {
			return nil, nil
		}
		if _, ok := long[u]; !ok {
			return nil, fmt.Errorf("invalid job state specified: %s", v)
		}
		out[u] = true
	}
	// Each compact code stands for its long name and back.
	for _, s := range []string{"PENDING:PD", "CONFIGURING:CF", "RUNNING:R", "SUSPENDED:S", "COMPLETED:CD",
		"FAILED:F", "CANCELLED:CA", "TIMEOUT:TO", "NODE_FAIL:NF", "REQUEUED:RQ"} {
		l, c, _ := strings.Cut(s, ":")
		if out[l] || out[c] {
			out[l], out[c] = true, true
		}
	}
	return out, nil
}

// liveJobs are the jobs schedd holds that ids, users and partitions
// pick: each id asked for alone (what pollers such as snakemake's
// `sacct -j ID` need), else the list filtered by schedd.
func liveJobs(ctx context.Context, c *client.Client, ids []uint64, users, parts []string) ([]api.Job, error) {
	if len(ids) > 0 {
		var jobs []api.Job
		for _, id := range ids {
			j, _, err := c.Job(ctx, id, 0, 0)
			switch {
			case client.IsNotFound(err):
			case err != nil:
				return nil, err
			default:
				jobs = append(jobs, j)
			}
		}
		return jobs, nil
	}
	q := url.Values{}
	for _, u := range users {
		if u != "all" {
			q.Add("user", u)
		}
	}
	for _, p := range parts {
		q.Add("partition", p)
	}
	l, err := c.JobsWhere(ctx, q, 0, 0)
	return l.Jobs, err
}
