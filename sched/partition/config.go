// Package partition reads etc/partitions.hcl, the file admins edit to
// divide the cluster: partitions (which nodes, which limits, which
// accounts and cluster modes they take), the fair-share account tree,
// the priority weights, the billing weights of usage, and the scheduler's
// policy settings. Parse reports every problem with file:line:col, as the
// job file does (jobspec); a Config that Parse returns is valid.
//
// A Config is plain data: schedd commits it to its raft log (so every
// replica schedules with the same one) and decodes it back from JSON;
// call Prepare on a Config that did not come from Parse before using its
// node matching.
//
//	partitions.hcl ──Parse──► Config ──raft (CmdConfig)──► state ──► scheduler loop
//	                   │                                          submit checks
//	                   └─ diagnostics (file:line:col): the running config stays
//
// Of troupe it imports jobspec, internal/units and internal/hclattr
// only; it must not import sched, sched/state or nodelet/....
package partition

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// Scheduling policies.
const (
	PolicyFairShare = "fairshare" // multifactor priority + backfill (the default)
	PolicyEASY      = "easy"      // FCFS order + EASY backfill
	PolicyFCFS      = "fcfs"      // strict first come, first served
)

// Defaults for settings the file leaves out.
const (
	DefaultName             = "default" // the one partition when there is no file
	DefaultHalfLife         = 7 * 24 * time.Hour
	DefaultReservationDepth = 1
	DefaultMaxAge           = 7 * 24 * time.Hour
	DefaultGPUQuantum       = 0.1
	// DefaultMaxOutput caps each output and error file of a job in a
	// partition that sets no max_output.
	DefaultMaxOutput int64 = 10 << 30
	// DefaultStarvationThreshold is the starvation threshold of a
	// partition that sets none (core.DefaultStarvationAge).
	DefaultStarvationThreshold = 6 * time.Hour
)

// Config is a decoded, validated partitions file.
type Config struct {
	// Source is the file it was read from ("" for the built-in default).
	Source string `json:"source,omitempty"`
	// DefaultPartition takes jobs that name none; it is one of Partitions.
	DefaultPartition string      `json:"default_partition"`
	Partitions       []Partition `json:"partitions"`
	// Accounts are the top-level accounts of the fair-share tree; nil:
	// no tree (jobs carry no account and fair share is flat).
	Accounts []Account `json:"accounts,omitempty"`
	// DefaultAccount takes jobs of users who are members of no account.
	// "": such users are refused when there is a tree.
	DefaultAccount   string        `json:"default_account,omitempty"`
	Policy           string        `json:"policy"`
	ReservationDepth int           `json:"reservation_depth"`
	HalfLife         time.Duration `json:"usage_half_life"` // 0: usage never decays
	Weights          Weights       `json:"weights"`
	Billing          Billing       `json:"billing"`
	// QOS are the qualities of service (qos blocks), in file order.
	QOS []QOS `json:"qos,omitempty"`
	// PreemptWindow is how long a preempted job may not be preempted
	// again; 0: DefaultPreemptWindow, negative: none (see Window).
	PreemptWindow time.Duration `json:"preempt_window,omitempty"`
	// PreemptDepth bounds the waiting jobs that choose victims in one
	// pass; 0: DefaultPreemptDepth, negative: no bound (see Depth).
	PreemptDepth int `json:"preempt_depth,omitempty"`
	// QueueDepth bounds the waiting jobs one pass tries besides those
	// that keep a reservation; 0: DefaultQueueDepth, negative: no bound
	// (see Queue).
	QueueDepth int `json:"queue_depth,omitempty"`
	// Licenses are the site-wide counts jobs ask for (license blocks),
	// in file order; see License.
	Licenses []License `json:"licenses,omitempty"`

	parts map[string]*Partition
	accts map[string]*Account
	users map[string][]string // user → accounts holding it, default first
}

// Partition is a set of nodes with its limits.
type Partition struct {
	Name string `json:"name"`
	// Nodes are names, ranges ("gpu[01-16]") or globs ("cpu*"); a node
	// belongs to the partition when it matches one or carries one of
	// Labels.
	Nodes           []string      `json:"nodes,omitempty"`
	Labels          []string      `json:"labels,omitempty"`
	MaxWalltime     time.Duration `json:"max_walltime,omitempty"`     // 0: unlimited
	DefaultWalltime time.Duration `json:"default_walltime,omitempty"` // 0: MaxWalltime
	MaxClusterSize  int           `json:"max_cluster_size,omitempty"` // 0: unlimited
	PriorityTier    int           `json:"priority_tier,omitempty"`
	AllowedAccounts []string      `json:"allowed_accounts,omitempty"` // empty: all
	AllowedModes    []string      `json:"allowed_modes,omitempty"`    // empty: both
	GPUQuantum      float64       `json:"gpu_quantum"`
	UserLimits      Limits        `json:"user_limits"`
	// Requeue puts jobs whose node fails back in the queue instead of
	// ending them NODE_FAIL, whatever the job file says.
	Requeue bool `json:"requeue,omitempty"`
	// MaxOutput caps the size of each output and error file of a job,
	// in bytes: the nodelet ends a job whose file passes it. 0:
	// DefaultMaxOutput (see OutputLimit).
	MaxOutput int64 `json:"max_output,omitempty"`
	// NoEgress (network { egress = false }) gives the partition's
	// containers no default network, no route out of their session
	// network: sealed sessions.
	NoEgress bool `json:"no_egress,omitempty"`
	// StarvationThreshold is how long a job of the partition may wait
	// before it goes ahead of every job that has waited less, oldest
	// first, and so to the reservation backfill may not delay. 0:
	// DefaultStarvationThreshold; negative: none (see Starvation).
	StarvationThreshold time.Duration `json:"starvation_threshold,omitempty"`
	// PreemptMode is how the partition's running jobs are preempted
	// (PreemptOff, PreemptCancel, PreemptRequeue, PreemptSuspend) by a
	// pending job of a higher priority_tier, or of a QOS that lists
	// theirs; a job's QOS may override it. "": off.
	PreemptMode string `json:"preempt_mode,omitempty"`
	// GraceTime is how long a preempted job's containers have between
	// SIGTERM and SIGKILL; 0: the nodelet's stop grace.
	GraceTime time.Duration `json:"grace_time,omitempty"`
	// PreemptExemptTime: a job of the partition that has run less than
	// this is never preempted.
	PreemptExemptTime time.Duration `json:"preempt_exempt_time,omitempty"`
	// DefaultQOS is the QOS of a job of the partition that names none.
	DefaultQOS string `json:"default_qos,omitempty"`

	names map[string]bool // expanded plain names and ranges
	globs []string
}

// Limits cap what one user may have in a partition at once; zero fields
// are unlimited.
type Limits struct {
	MaxJobs       int     `json:"max_jobs,omitempty"`        // started and not ended
	MaxSubmitJobs int     `json:"max_submit_jobs,omitempty"` // not ended, pending included
	MaxCPU        float64 `json:"max_cpu,omitempty"`         // cores held by started jobs
	MaxMemory     int64   `json:"max_memory,omitempty"`      // bytes held by started jobs
	MaxGPU        float64 `json:"max_gpu,omitempty"`         // GPUs held by started jobs
}

// Account is a node of the fair-share tree.
type Account struct {
	Name     string    `json:"name"`
	Shares   float64   `json:"shares"`
	Users    []User    `json:"users,omitempty"`
	Children []Account `json:"children,omitempty"`
	// DefaultQOS is the QOS of the account's jobs (and its
	// sub-accounts') that name none and whose partition sets none.
	DefaultQOS string `json:"default_qos,omitempty"`
}

// User is a user's membership of an account.
type User struct {
	Name    string  `json:"name"`
	Shares  float64 `json:"shares"`
	Default bool    `json:"default,omitempty"` // the user's default account
}

// Weights are the multifactor priority weights: each factor is in [0,1]
// and the priority is the weighted sum (minus the job's nice).
type Weights struct {
	Age       float64 `json:"age"`
	FairShare float64 `json:"fair_share"`
	JobSize   float64 `json:"job_size"`
	Tier      float64 `json:"tier"`
	// QOS weighs the job's QOS priority over the highest QOS priority.
	QOS    float64       `json:"qos,omitempty"`
	MaxAge time.Duration `json:"max_age"` // age at which the age factor reaches 1
	// FavorSmall makes the job-size factor favour small jobs (Slurm
	// PriorityFavorSmall).
	FavorSmall bool `json:"favor_small"`
}

// Billing weighs usage: one core-second of CPU costs CPU, one GiB-second
// of memory Memory, one GPU-second GPU.
type Billing struct {
	CPU    float64 `json:"cpu"`
	Memory float64 `json:"memory"` // per GiB
	GPU    float64 `json:"gpu"`
}

// Default is the configuration without a file: one partition of every
// node, no limits, no account tree.
func Default() *Config {
	c := &Config{
		DefaultPartition: DefaultName,
		Partitions:       []Partition{{Name: DefaultName, Nodes: []string{"*"}, GPUQuantum: DefaultGPUQuantum, MaxOutput: DefaultMaxOutput}},
		Policy:           PolicyFairShare,
		ReservationDepth: DefaultReservationDepth,
		HalfLife:         DefaultHalfLife,
		Weights:          DefaultWeights(),
		Billing:          DefaultBilling(),
	}
	if err := c.Prepare(); err != nil {
		panic(err) // a bug, caught by every test
	}
	return c
}

// DefaultWeights are the priority weights the file can override:
// core.DefaultPolicy's, so schedd schedules as bsim measures (age and
// fair share equal, wide jobs favoured for the reservation).
func DefaultWeights() Weights {
	return Weights{Age: 10000, FairShare: 10000, JobSize: 20000, Tier: 10000, QOS: 10000, MaxAge: DefaultMaxAge}
}

// DefaultBilling are the billing weights the file can override.
func DefaultBilling() Billing { return Billing{CPU: 1, Memory: 0.25, GPU: 10} }

// Prepare builds the lookup tables (node matching, accounts, users). Parse
// calls it; call it on a Config decoded from JSON.
func (c *Config) Prepare() error {
	c.parts = map[string]*Partition{}
	for i := range c.Partitions {
		p := &c.Partitions[i]
		p.names, p.globs = map[string]bool{}, nil
		for _, pat := range p.Nodes {
			if isGlob(pat) {
				if _, err := path.Match(pat, ""); err != nil {
					return fmt.Errorf("partition %s: node pattern %q: %w", p.Name, pat, err)
				}
				p.globs = append(p.globs, pat)
				continue
			}
			names, err := Expand(pat)
			if err != nil {
				return fmt.Errorf("partition %s: %w", p.Name, err)
			}
			for _, n := range names {
				p.names[n] = true
			}
		}
		c.parts[p.Name] = p
	}
	if c.parts[c.DefaultPartition] == nil {
		return fmt.Errorf("default partition %q is not defined", c.DefaultPartition)
	}
	c.accts, c.users = map[string]*Account{}, map[string][]string{}
	var walk func(as []Account)
	walk = func(as []Account) {
		for i := range as {
			a := &as[i]
			c.accts[a.Name] = a
			for _, u := range a.Users {
				if u.Default {
					c.users[u.Name] = append([]string{a.Name}, c.users[u.Name]...)
				} else {
					c.users[u.Name] = append(c.users[u.Name], a.Name)
				}
			}
			walk(a.Children)
		}
	}
	walk(c.Accounts)
	return nil
}

// EgressAllowed tells whether p's containers get the default network
// (true unless p says egress = false; true for no partition).
func (p *Partition) EgressAllowed() bool { return p == nil || !p.NoEgress }

// Starvation is p's starvation threshold: StarvationThreshold,
// DefaultStarvationThreshold when unset (a config committed before
// starvation_threshold existed) or p is nil; negative: none.
func (p *Partition) Starvation() time.Duration {
	if p == nil || p.StarvationThreshold == 0 {
		return DefaultStarvationThreshold
	}
	return p.StarvationThreshold
}

// OutputLimit is p's MaxOutput, DefaultMaxOutput when unset (a config
// committed before max_output existed) or p is nil.
func (p *Partition) OutputLimit() int64 {
	if p == nil || p.MaxOutput <= 0 {
		return DefaultMaxOutput
	}
	return p.MaxOutput
}

// Partition returns the partition named name, or nil.
func (c *Config) Partition(name string) *Partition { return c.parts[name] }

// PartitionNames lists the partitions in file order.
func (c *Config) PartitionNames() []string {
	out := make([]string, len(c.Partitions))
	for i, p := range c.Partitions {
		out[i] = p.Name
	}
	return out
}

// Account returns the account named name, or nil.
func (c *Config) Account(name string) *Account { return c.accts[name] }

// HasTree reports whether the file defines accounts.
func (c *Config) HasTree() bool { return len(c.Accounts) > 0 }

// UserAccounts lists the accounts user is a member of, default first.
func (c *Config) UserAccounts(user string) []string { return c.users[user] }

// ResolveAccount picks the account a job of user runs under: the one it
// names, else the user's default, else DefaultAccount. With no tree it is
// always "". The error says why the job may not run under it.
func (c *Config) ResolveAccount(user, asked string) (string, error) {
	if !c.HasTree() {
		if asked != "" {
			return "", fmt.Errorf("account %q does not exist: the partitions file defines no accounts", asked)
		}
		return "", nil
	}
	mine := c.users[user]
	if asked == "" {
		switch {
		case len(mine) > 0:
			return mine[0], nil
		case c.DefaultAccount != "":
			return c.DefaultAccount, nil
		}
		return "", fmt.Errorf("user %q is a member of no account and the partitions file sets no default_account", user)
	}
	if c.accts[asked] == nil {
		return "", fmt.Errorf("account %q does not exist; known accounts: %s", asked, listOrNone(c.accountNames()))
	}
	if slices.Contains(mine, asked) || (len(mine) == 0 && asked == c.DefaultAccount) {
		return asked, nil
	}
	return "", fmt.Errorf("user %q is not a member of account %q; the user's accounts: %s", user, asked, listOrNone(mine))
}

func (c *Config) accountNames() []string {
	var out []string
	var walk func(as []Account)
	walk = func(as []Account) {
		for _, a := range as {
			out = append(out, a.Name)
			walk(a.Children)
		}
	}
	walk(c.Accounts)
	return out
}

// AccountPath lists the accounts from the top of the tree down to name
// (nil if there is no such account).
func (c *Config) AccountPath(name string) []string {
	var out []string
	var walk func(as []Account, up []string) bool
	walk = func(as []Account, up []string) bool {
		for _, a := range as {
			p := append(slices.Clone(up), a.Name)
			if a.Name == name {
				out = p
				return true
			}
			if walk(a.Children, p) {
				return true
			}
		}
		return false
	}
	walk(c.Accounts, nil)
	return out
}

// Allows reports whether the partition takes jobs of account (or of one
// of its sub-accounts, given its path from the top).
func (p *Partition) Allows(accountPath []string) bool {
	if len(p.AllowedAccounts) == 0 {
		return true
	}
	for _, a := range accountPath {
		if slices.Contains(p.AllowedAccounts, a) {
			return true
		}
	}
	return false
}

// AllowsMode reports whether the partition takes cluster mode m.
func (p *Partition) AllowsMode(m string) bool {
	return len(p.AllowedModes) == 0 || slices.Contains(p.AllowedModes, m)
}

// Has reports whether a node named name with labels belongs to p.
func (p *Partition) Has(name string, labels []string) bool {
	if p.names[name] {
		return true
	}
	for _, g := range p.globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	for _, l := range labels {
		if slices.Contains(p.Labels, l) {
			return true
		}
	}
	return false
}

// Walltime is the limit a job asking for w gets: w, else the partition's
// default, else its maximum (0: none).
func (p *Partition) Walltime(w time.Duration) time.Duration {
	switch {
	case w > 0:
		return w
	case p.DefaultWalltime > 0:
		return p.DefaultWalltime
	}
	return p.MaxWalltime
}

func listOrNone(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	return strings.Join(ss, ", ")
}
