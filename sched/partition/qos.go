package partition

import (
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/troupe-hpc/troupe/internal/hclattr"
	"github.com/troupe-hpc/troupe/internal/units"
)

// Preemption modes: what happens to a running job that a more urgent one
// preempts (partition's and QOS's preempt_mode).
const (
	PreemptOff     = "off"     // never preempted
	PreemptCancel  = "cancel"  // stopped, ends PREEMPTED
	PreemptRequeue = "requeue" // stopped, back to PENDING with its id, its run kept
	PreemptSuspend = "suspend" // frozen in place, resumed when the preemptor's resources free
)

// PreemptModes are the modes preempt_mode takes.
var PreemptModes = []string{PreemptOff, PreemptCancel, PreemptRequeue, PreemptSuspend}

// DefaultPreemptWindow is how long a preempted job may not be preempted
// again when the file sets no preempt_window: a requeued job runs at
// least that long before it can lose its nodes a second time.
const DefaultPreemptWindow = 10 * time.Minute

// QOS is a quality of service (Slurm's QOS): a priority added to its jobs',
// the QOSes whose running jobs its pending ones may preempt, and limits.
type QOS struct {
	Name string `json:"name"`
	// Priority is added to its jobs' priority (weighted by the priority
	// block's qos weight, as a fraction of the highest QOS priority).
	// Jobs of a lower QOS priority are preempted first.
	Priority float64 `json:"priority,omitempty"`
	// Preempt names the QOSes whose running jobs this QOS's pending jobs
	// may preempt.
	Preempt []string `json:"preempt,omitempty"`
	// PreemptMode is what happens to this QOS's jobs when they are
	// preempted; "" follows the partition's.
	PreemptMode string `json:"preempt_mode,omitempty"`
	// MaxWall refuses at submit a job asking for more; 0: none.
	MaxWall time.Duration `json:"max_wall,omitempty"`
	// UserLimits cap one user's running jobs of the QOS (max_jobs_per_user,
	// max_cpu_per_user, max_gpu_per_user); a job past them waits with
	// reason AccountLimit.
	MaxJobsPerUser int     `json:"max_jobs_per_user,omitempty"`
	MaxCPUPerUser  float64 `json:"max_cpu_per_user,omitempty"`
	MaxGPUPerUser  float64 `json:"max_gpu_per_user,omitempty"`
	// UsageFactor scales what the QOS's jobs are charged toward fair
	// share; 0 reads as 1 (a scavenger QOS might set 0.1).
	UsageFactor *float64 `json:"usage_factor,omitempty"`
}

// Factor is q's usage factor: UsageFactor, 1 when unset.
func (q *QOS) Factor() float64 {
	if q == nil || q.UsageFactor == nil {
		return 1
	}
	return *q.UsageFactor
}

// QOSByName returns the QOS named name, or nil.
func (c *Config) QOSByName(name string) *QOS {
	for i := range c.QOS {
		if c.QOS[i].Name == name {
			return &c.QOS[i]
		}
	}
	return nil
}

// DefaultPreemptDepth is how many waiting jobs may choose victims in one
// scheduling pass when the file sets none: the rest are tried on the
// next pass, in priority order.
const DefaultPreemptDepth = 100

// Depth is the bound on the waiting jobs that choose victims in one
// pass (DefaultPreemptDepth when the file sets none); 0: no bound.
func (c *Config) Depth() int {
	if c.PreemptDepth == 0 {
		return DefaultPreemptDepth
	}
	return max(0, c.PreemptDepth)
}

// Window is the preemption window: how long a preempted job may not be
// preempted again (DefaultPreemptWindow when the file sets none).
func (c *Config) Window() time.Duration {
	if c.PreemptWindow == 0 {
		return DefaultPreemptWindow
	}
	return max(0, c.PreemptWindow)
}

// ResolveQOS picks the QOS a job of account in partition p runs under:
// the one it names, else the partition's default, else the account's
// (the nearest up the tree), else none. The error names the QOS asked
// for and those defined.
func (c *Config) ResolveQOS(p *Partition, account, asked string) (string, error) {
	if asked != "" {
		if c.QOSByName(asked) == nil {
			names := make([]string, len(c.QOS))
			for i := range c.QOS {
				names[i] = c.QOS[i].Name
			}
			return "", fmt.Errorf("qos %q is not defined in the partitions file; known QOSes: %s", asked, listOrNone(names))
		}
		return asked, nil
	}
	if p != nil && p.DefaultQOS != "" {
		return p.DefaultQOS, nil
	}
	path := c.AccountPath(account)
	for i := len(path) - 1; i >= 0; i-- {
		if a := c.accts[path[i]]; a != nil && a.DefaultQOS != "" {
			return a.DefaultQOS, nil
		}
	}
	return "", nil
}

// PreemptModeOf is how a job of QOS qos in partition p is preempted: its
// QOS's preempt_mode, else its partition's, else off.
func (c *Config) PreemptModeOf(p *Partition, qos string) string {
	if q := c.QOSByName(qos); q != nil && q.PreemptMode != "" {
		return q.PreemptMode
	}
	if p != nil && p.PreemptMode != "" {
		return p.PreemptMode
	}
	return PreemptOff
}

var qosSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "priority"}, {Name: "preempt"}, {Name: "preempt_mode"}, {Name: "max_wall"},
		{Name: "max_jobs_per_user"}, {Name: "max_cpu_per_user"}, {Name: "max_gpu_per_user"}, {Name: "usage_factor"},
	},
}

// qosBlocks reads every qos block of the file, then checks that the QOSes
// each preempt list names exist.
func (d *decoder) qosBlocks(blocks hcl.Blocks) []QOS {
	var out []QOS
	where := map[string]hcl.Range{}
	lists := map[int]*hcl.Attribute{}
	for _, b := range blocks {
		if b.Type != "qos" {
			continue
		}
		q := QOS{Name: b.Labels[0]}
		if !nameRe(q.Name) {
			d.Errorf(b.LabelRanges[0], "Invalid qos name", "QOS name %q is not valid; a name starts with a letter and holds letters, digits, '_' and '-'.", q.Name)
		}
		if first, dup := where[q.Name]; dup {
			d.Errorf(b.LabelRanges[0], "Duplicate qos", "QOS %q was already defined at %s; give each QOS one block.", q.Name, hclattr.Pos(first))
			continue
		}
		where[q.Name] = b.LabelRanges[0]
		_, attrs := d.attrs(b.Body, qosSchema)
		if a, ok := attrs.Number("priority", &q.Priority); ok && (q.Priority < 0 || q.Priority > 1e9) {
			d.Errorf(a.Expr.Range(), "Invalid priority", "qos priority %g is not valid; it is between 0 and 1e9.", q.Priority)
		}
		if a, ok := attrs.Strings("preempt", &q.Preempt); ok {
			lists[len(out)] = a
		}
		d.preemptMode(attrs, &q.PreemptMode)
		d.duration(attrs, "max_wall", &q.MaxWall, false)
		if a, ok := attrs.Whole("max_jobs_per_user", &q.MaxJobsPerUser); ok && q.MaxJobsPerUser < 1 {
			d.Errorf(a.Expr.Range(), "Invalid max_jobs_per_user", "max_jobs_per_user %d is not valid; it is at least 1 (leave it out for no limit).", q.MaxJobsPerUser)
		}
		for _, name := range []string{"max_cpu_per_user", "max_gpu_per_user"} {
			dst := &q.MaxCPUPerUser
			if name == "max_gpu_per_user" {
				dst = &q.MaxGPUPerUser
			}
			if a, ok := attrs.Number(name, dst); ok && !(*dst > 0) {
				d.Errorf(a.Expr.Range(), "Invalid "+name, "%s %g is not valid; it is above 0 (leave it out for no limit).", name, *dst)
			}
		}
		var f float64
		if a, ok := attrs.Number("usage_factor", &f); ok {
			if !(f >= 0 && f <= 1e3) {
				d.Errorf(a.Expr.Range(), "Invalid usage_factor", "usage_factor %g is not valid; it is between 0 (the QOS's jobs are charged nothing) and 1000.", f)
			}
			q.UsageFactor = &f
		}
		out = append(out, q)
	}
	for i, a := range lists {
		d.known(a, out[i].Preempt, where, "qos")
		for k, name := range out[i].Preempt {
			// A QOS preempts only jobs of a lower priority: never its
			// equals, so two QOSes cannot take turns preempting each other.
			if v := qosIn(out, name); v != nil && v.Priority >= out[i].Priority {
				d.Errorf(hclattr.ElemRange(a, k), "QOS preempts its equal", "qos %q lists %q in preempt, but its priority %g is not above %q's %g; a QOS preempts only QOSes of a lower priority.",
					out[i].Name, name, out[i].Priority, name, v.Priority)
			}
		}
	}
	return out
}

// preemptMode reads preempt_mode.
func (d *decoder) preemptMode(attrs hclattr.Attrs, dst *string) {
	if a, ok := attrs.String("preempt_mode", dst); ok && !slices.Contains(PreemptModes, *dst) {
		d.Errorf(a.Expr.Range(), "Invalid preempt_mode", "preempt_mode %q is not known; write %q, %q, %q or %q.", *dst,
			PreemptOff, PreemptCancel, PreemptRequeue, PreemptSuspend)
	}
}

// preemptSettings reads a partition's preemption settings.
func (d *decoder) preemptSettings(attrs hclattr.Attrs, p *Partition) {
	d.preemptMode(attrs, &p.PreemptMode)
	d.duration(attrs, "grace_time", &p.GraceTime, true)
	d.duration(attrs, "preempt_exempt_time", &p.PreemptExemptTime, true)
	d.defaultQOS(attrs, &p.DefaultQOS)
}

// qosRef is a default_qos as the file wrote it, checked once every
// qos block is read.
type qosRef struct {
	name string
	rng  hcl.Range
}

// defaultQOS reads a default_qos (of a partition or an account) into dst
// and remembers it for checkQOSNames.
func (d *decoder) defaultQOS(attrs hclattr.Attrs, dst *string) {
	if a, ok := attrs.String("default_qos", dst); ok && *dst != "" {
		d.qosRefs = append(d.qosRefs, qosRef{*dst, a.Expr.Range()})
	}
}

// checkQOSNames reports a default_qos that names no QOS of the file.
func (d *decoder) checkQOSNames(c *Config) {
	names := make([]string, len(c.QOS))
	for i := range c.QOS {
		names[i] = c.QOS[i].Name
	}
	for _, r := range d.qosRefs {
		if c.QOSByName(r.name) == nil {
			d.Errorf(r.rng, "Unknown qos", "default_qos %q is not a qos of this file; known QOSes: %s.", r.name, listOrNone(names))
		}
	}
}

// MaxCPUMilli is q's max_cpu_per_user in millicores (0: none).
func (q *QOS) MaxCPUMilli() int64 { return units.MilliCPU(q.MaxCPUPerUser) }

func qosIn(qs []QOS, name string) *QOS {
	for i := range qs {
		if qs[i].Name == name {
			return &qs[i]
		}
	}
	return nil
}
