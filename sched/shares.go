package sched

import (
	"sort"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/fairshare"
	"github.com/troupe-hpc/troupe/sched/partition"
	"github.com/troupe-hpc/troupe/sched/state"
)

// fairShare lays the config's account tree and the decayed usage in the
// state over sched/fairshare (F = 2^(−U/S), Slurm's classic formula) and
// returns sshare's rows and the factor of each association, keyed
// "account/user" (and "account" for accounts).
//
// Every user of an account is a leaf "account/user" under it. Usage of a
// user charged to an account that does not list the user (default_account)
// counts as the account's own, and such jobs take the account's factor.
// Usage of accounts no longer in the file is left out.
//
// With no tree every user is a leaf with one share under the root, keyed
// "/user"; the users are those with usage or in extra (pending jobs').
func fairShare(cfg *partition.Config, usage []*state.Usage, extra []string) ([]api.FairShareRow, map[string]float64) {
	var nodes []fairshare.Node
	if cfg.HasTree() {
		var walk func(as []partition.Account, parent string)
		walk = func(as []partition.Account, parent string) {
			for _, a := range as {
				nodes = append(nodes, fairshare.Node{Name: a.Name, Parent: parent, Shares: a.Shares})
				for _, u := range a.Users {
					nodes = append(nodes, fairshare.Node{Name: a.Name + "/" + u.Name, Parent: a.Name, Shares: u.Shares, User: u.Name})
				}
				walk(a.Children, a.Name)
			}
		}
		walk(cfg.Accounts, "")
	} else {
		users := map[string]bool{}
		for _, u := range usage {
			users[u.User] = true
		}
		for _, u := range extra {
			users[u] = true
		}
		names := make([]string, 0, len(users))
		for u := range users {
			names = append(names, u)
		}
		sort.Strings(names)
		for _, u := range names {
			nodes = append(nodes, fairshare.Node{Name: "/" + u, Shares: 1, User: u})
		}
	}
	known := map[string]bool{}
	for _, n := range nodes {
		known[n.Name] = true
	}
	t := fairshare.New(nodes)
	for _, u := range usage {
		switch k := u.Account + "/" + u.User; {
		case known[k]:
			t.Charge(k, u.Raw)
		case cfg.HasTree() && known[u.Account]:
			t.Charge(u.Account, u.Raw)
		}
	}
	rows, factors := t.Compute()
	out := make([]api.FairShareRow, 0, len(rows))
	for _, r := range rows {
		acct := r.Account
		if acct == fairshare.Root {
			acct = ""
		}
		out = append(out, api.FairShareRow{Account: acct, User: r.User, Depth: r.Depth, RawShares: r.RawShares,
			NormShares: r.NormShares, RawUsage: r.RawUsage, EffectvUsage: r.EffUsage, FairShare: r.FairShare})
	}
	return out, factors
}

// jobFactor is a job's fair-share factor: its association's, else its
// account's (a user charged to default_account), else 1 (unknown).
func jobFactor(factors map[string]float64, account, user string) float64 {
	if f, ok := factors[account+"/"+user]; ok {
		return f
	}
	if f, ok := factors[account]; ok && account != "" {
		return f
	}
	return 1
}
