package main

import (
	"context"
	"fmt"
	"net/url"
	"slices"
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

// jobSel is one job id as Slurm's -j takes it: a job ("12"), an array
// (its id: every element), an element of one ("12_3"), or a step
// ("12.0", "12.batch": its job).
type jobSel struct {
	id      uint64
	index   int
	element bool
}

// matches says whether the job (or the element of array arrayID at
// index) is one sel names.
func (s jobSel) matches(id, arrayID uint64, index int) bool {
	if s.element {
		return arrayID == s.id && index == s.index
	}
	return id == s.id || arrayID == s.id
}

// jobSels reads Slurm job ids ("12", "12,13", "12_3", "12.0").
func jobSels(vals []string) ([]jobSel, error) {
	var out []jobSel
	for _, v := range vals {
		base, _, _ := strings.Cut(v, ".")
		base, idx, element := strings.Cut(base, "_")
		id, err := strconv.ParseUint(base, 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("invalid job id: %s", v)
		}
		s := jobSel{id: id}
		if element {
			n, err := strconv.Atoi(idx)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("invalid job id: %s", v)
			}
			s.index, s.element = n, true
		}
		out = append(out, s)
	}
	return out, nil
}

// selIDs are the distinct job (or array) ids sels name.
func selIDs(sels []jobSel) []uint64 {
	var ids []uint64
	for _, s := range sels {
		if !slices.Contains(ids, s.id) {
			ids = append(ids, s.id)
		}
	}
	return ids
}

// anySel says whether sels is empty or one of them matches.
func anySel(sels []jobSel, id, arrayID uint64, index int) bool {
	if len(sels) == 0 {
		return true
	}
	for _, s := range sels {
		if s.matches(id, arrayID, index) {
			return true
		}
	}
	return false
}

// slurmOnlyStates are Slurm's job states that troupe's jobs are never
// in, long and compact: squeue -t and sacct -s take them (workflow tools
// list them) and they match nothing.
var slurmOnlyStates = []string{"BOOT_FAIL:BF", "COMPLETING:CG", "DEADLINE:DL", "OUT_OF_MEMORY:OOM", "PREEMPTED:PR",
	"RESV_DEL_HOLD:RD", "REQUEUE_FED:RF", "REQUEUE_HOLD:RH", "REQUEUED:RQ", "RESIZING:RS", "REVOKED:RV",
	"SIGNALING:SI", "SPECIAL_EXIT:SE", "STAGE_OUT:SO", "STOPPED:ST"}

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
	for _, s := range slurmOnlyStates {
		l, c, _ := strings.Cut(s, ":")
		long[l], long[c] = l, c
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
		"FAILED:F", "CANCELLED:CA", "TIMEOUT:TO", "NODE_FAIL:NF", "PREEMPTED:PR", "REQUEUED:RQ"} {
		l, c, _ := strings.Cut(s, ":")
		if out[l] || out[c] {
			out[l], out[c] = true, true
		}
	}
	return out, nil
}

// liveJobs are the jobs schedd holds that sels, users and partitions
// pick: each job asked for alone (what pollers such as snakemake's
// `sacct -j ID` need), an array element by its own path (12[5]), not
// among all its array's elements; else the list filtered by schedd.
func liveJobs(ctx context.Context, c *client.Client, sels []jobSel, users, parts []string) ([]api.Job, error) {
	if len(sels) > 0 {
		var jobs []api.Job
		var whole []uint64
		for _, s := range sels {
			if !s.element {
				if !slices.Contains(whole, s.id) {
					whole = append(whole, s.id)
				}
				continue
			}
			j, _, err := c.JobRef(ctx, api.JobRef{ID: s.id, Index: s.index, Element: true}, 0, 0)
			switch {
			case client.IsNotFound(err):
			case err != nil:
				return nil, err
			case j.ID == 0:
				// No row of its own yet: its array's row stands for it.
				if !slices.Contains(whole, s.id) {
					whole = append(whole, s.id)
				}
			default:
				jobs = append(jobs, j)
			}
		}
		for _, id := range whole {
			j, _, err := c.Job(ctx, id, 0, 0)
			switch {
			case client.IsNotFound(err):
			case err != nil:
				return nil, err
			default:
				jobs = append(jobs, j)
			}
			if err == nil && j.Array != nil {
				// An array's id names its elements too.
				l, err := c.JobsWhere(ctx, url.Values{"array": {strconv.FormatUint(id, 10)}}, 0, 0)
				if err != nil {
					return nil, err
				}
				for _, e := range l.Jobs {
					if e.ID != 0 && e.ID != id { // an element without a row (0) is the array's row's
						jobs = append(jobs, e)
					}
				}
			}
		}
		return dedupeJobs(jobs), nil
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

// dedupeJobs keeps the first of each job row (an element asked for
// alone and with its whole array comes twice).
func dedupeJobs(jobs []api.Job) []api.Job {
	seen := map[uint64]bool{}
	out := jobs[:0]
	for _, j := range jobs {
		if seen[j.ID] {
			continue
		}
		seen[j.ID] = true
		out = append(out, j)
	}
	return out
}
