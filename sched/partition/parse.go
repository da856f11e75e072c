package partition

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/troupe-hpc/troupe/internal/hclattr"
	"github.com/troupe-hpc/troupe/internal/units"
	"github.com/troupe-hpc/troupe/jobspec"
)

var (
	fileSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "default_partition"}, {Name: "default_account"}, {Name: "policy"},
			{Name: "reservation_depth"}, {Name: "usage_half_life"}, {Name: "preempt_window"}, {Name: "preempt_depth"},
			{Name: "queue_depth"},
		},
		Blocks: []hcl.BlockHeaderSchema{
			{Type: "partition", LabelNames: []string{"name"}},
			{Type: "account", LabelNames: []string{"name"}},
			{Type: "priority"}, {Type: "billing"},
			{Type: "qos", LabelNames: []string{"name"}},
			{Type: "license", LabelNames: []string{"name"}},
		},
	}
	partitionSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "default"}, {Name: "nodes"}, {Name: "labels"}, {Name: "max_walltime"},
			{Name: "default_walltime"}, {Name: "max_cluster_size"}, {Name: "priority_tier"},
			{Name: "allowed_accounts"}, {Name: "allowed_modes"}, {Name: "gpu_quantum"},
			{Name: "requeue"}, {Name: "max_output"}, {Name: "starvation_threshold"},
			{Name: "preempt_mode"}, {Name: "grace_time"}, {Name: "preempt_exempt_time"}, {Name: "default_qos"},
		},
		Blocks: []hcl.BlockHeaderSchema{{Type: "user_limits"}, {Type: "network"}},
	}
	networkSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "egress"}}}
	limitsSchema  = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "max_jobs"}, {Name: "max_submit_jobs"}, {Name: "max_cpu"}, {Name: "max_memory"}, {Name: "max_gpu"},
		},
	}
	accountSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "shares"}, {Name: "users"}, {Name: "default_qos"}},
		Blocks: []hcl.BlockHeaderSchema{
			{Type: "account", LabelNames: []string{"name"}},
			{Type: "user", LabelNames: []string{"name"}},
		},
	}
	userSchema     = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "shares"}, {Name: "default"}}}
	prioritySchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "age"}, {Name: "fair_share"}, {Name: "job_size"}, {Name: "tier"}, {Name: "qos"}, {Name: "max_age"}, {Name: "favor_small"},
		},
	}
	billingSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "cpu"}, {Name: "memory"}, {Name: "gpu"}}}
)

// ParseFile reads and parses the partitions file at path.
func ParseFile(path string) (*Config, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read partitions file", Detail: err.Error()}}
	}
	return Parse(path, src)
}

// Parse decodes and validates a partitions file. filename names it in
// diagnostics. The Config is nil if and only if diags.HasErrors(); every
// problem found is reported, in source order, with its position.
func Parse(filename string, src []byte) (*Config, hcl.Diagnostics) {
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() || file == nil {
		return nil, tidy(diags)
	}
	d := &decoder{}
	c := d.file(file.Body)
	c.Source = filename
	diags = tidy(append(diags, d.Diags...))
	if diags.HasErrors() {
		return nil, diags
	}
	if err := c.Prepare(); err != nil {
		// Validation catches what Prepare checks; this is a bug if reached.
		return nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid partitions file", Detail: err.Error()})
	}
	return c, diags
}

// FormatDiagnostics writes diags one a line, "file:line:col: summary;
// detail", as jobspec does for job files.
func FormatDiagnostics(diags hcl.Diagnostics) string { return jobspec.FormatDiagnostics(diags) }

// decoder reads the file's blocks; hclattr reads their attributes.
type decoder struct {
	hclattr.Decoder
	qosRefs []qosRef // default_qos settings, checked once the qos blocks are read
}

// attrs reads body's content against schema: its blocks, and its
// attributes.
func (d *decoder) attrs(body hcl.Body, schema *hcl.BodySchema) (*hcl.BodyContent, hclattr.Attrs) {
	c := d.Content(body, schema)
	return c, d.Attrs(c.Attributes, "")
}

func (d *decoder) file(body hcl.Body) *Config {
	c := &Config{
		Policy: PolicyFairShare, ReservationDepth: DefaultReservationDepth, HalfLife: DefaultHalfLife,
		Weights: DefaultWeights(), Billing: DefaultBilling(),
	}
	ct, attrs := d.attrs(body, fileSchema)
	attrs.String("default_partition", &c.DefaultPartition)
	attrs.String("default_account", &c.DefaultAccount)
	if a, ok := attrs.String("policy", &c.Policy); ok && !slices.Contains([]string{PolicyFairShare, PolicyEASY, PolicyFCFS}, c.Policy) {
		d.Errorf(a.Expr.Range(), "Invalid policy", "policy %q is not known; write %q (multifactor priority and backfill, the default), %q (first come, first served with EASY backfill) or %q (strict first come, first served).",
			c.Policy, PolicyFairShare, PolicyEASY, PolicyFCFS)
	}
	if a, ok := attrs.Whole("reservation_depth", &c.ReservationDepth); ok && c.ReservationDepth < 0 {
		d.Errorf(a.Expr.Range(), "Invalid reservation_depth", "reservation_depth %d is negative; 0 turns backfill off, 1 is EASY backfill, more reserves for more jobs.", c.ReservationDepth)
	}
	d.duration(attrs, "usage_half_life", &c.HalfLife, true)
	if _, ok := d.duration(attrs, "preempt_window", &c.PreemptWindow, true); ok && c.PreemptWindow == 0 {
		c.PreemptWindow = -1 // "0s": no window
	}
	if a, ok := attrs.Whole("preempt_depth", &c.PreemptDepth); ok {
		switch {
		case c.PreemptDepth < 0:
			d.Errorf(a.Expr.Range(), "Invalid preempt_depth", "preempt_depth %d is negative; it is how many waiting jobs may choose victims in one pass (0: no bound).", c.PreemptDepth)
		case c.PreemptDepth == 0:
			c.PreemptDepth = -1 // "0": no bound
		}
	}
	if a, ok := attrs.Whole("queue_depth", &c.QueueDepth); ok {
		switch {
		case c.QueueDepth < 0:
			d.Errorf(a.Expr.Range(), "Invalid queue_depth", "queue_depth %d is negative; it is how many waiting jobs one scheduling pass tries besides those that keep a reservation (0: no bound).", c.QueueDepth)
		case c.QueueDepth == 0:
			c.QueueDepth = -1 // "0": no bound
		}
	}
	c.QOS = d.qosBlocks(ct.Blocks)

	var parts []*hcl.Block
	for _, b := range ct.Blocks {
		switch b.Type {
		case "partition":
			parts = append(parts, b)
		case "priority":
			d.priority(b, &c.Weights)
		case "billing":
			d.billing(b, &c.Billing)
		}
	}
	d.once(ct.Blocks, "priority")
	d.once(ct.Blocks, "billing")
	c.Licenses = d.licenses(ct.Blocks)

	seenAcct := map[string]hcl.Range{}
	seenUser := map[string]hcl.Range{}
	for _, b := range ct.Blocks {
		if b.Type == "account" {
			if a, ok := d.account(b, seenAcct, seenUser); ok {
				c.Accounts = append(c.Accounts, a)
			}
		}
	}

	if len(parts) == 0 {
		d.Errorf(ct.MissingItemRange, "Missing partition block",
			`A partitions file defines at least one partition: partition "batch" { nodes = ["node[01-16]"] }.`)
		return c
	}
	where := map[string]hcl.Range{}
	var defaults []*hcl.Block
	for _, b := range parts {
		p, isDefault := d.partition(b, seenAcct)
		if first, dup := where[p.Name]; dup {
			d.Errorf(b.LabelRanges[0], "Duplicate partition", "Partition %q was already defined at %s; give each partition one block.", p.Name, hclattr.Pos(first))
			continue
		}
		where[p.Name] = b.LabelRanges[0]
		if isDefault {
			defaults = append(defaults, b)
		}
		c.Partitions = append(c.Partitions, p)
	}
	for _, b := range defaults[min(1, len(defaults)):] {
		d.Errorf(b.LabelRanges[0], "Two default partitions", "Partition %q says default = true, and so does %q at %s; one partition is the default.",
			b.Labels[0], defaults[0].Labels[0], hclattr.Pos(defaults[0].LabelRanges[0]))
	}
	if a := attrs.Get("default_partition"); a != nil && c.DefaultPartition != "" {
		if _, ok := where[c.DefaultPartition]; !ok {
			d.Errorf(a.Expr.Range(), "Unknown default partition", "default_partition %q is not defined; defined partitions: %s.", c.DefaultPartition, strings.Join(c.PartitionNames(), ", "))
		}
		if len(defaults) > 0 && defaults[0].Labels[0] != c.DefaultPartition {
			d.Errorf(defaults[0].LabelRanges[0], "Two default partitions", "Partition %q says default = true, but default_partition at %s names %q; keep one.",
				defaults[0].Labels[0], hclattr.Pos(a.Expr.Range()), c.DefaultPartition)
		}
	}
	switch {
	case c.DefaultPartition != "":
	case len(defaults) > 0:
		c.DefaultPartition = defaults[0].Labels[0]
	case len(c.Partitions) > 0:
		c.DefaultPartition = c.Partitions[0].Name
	}
	d.checkQOSNames(c)
	if a := attrs.Get("default_account"); a != nil && c.DefaultAccount != "" {
		if _, ok := seenAcct[c.DefaultAccount]; !ok {
			d.Errorf(a.Expr.Range(), "Unknown default account", "default_account %q is not an account of this file; known accounts: %s.", c.DefaultAccount, listOrNone(sortedKeys(seenAcct)))
		}
	}
	return c
}

func (d *decoder) once(blocks hcl.Blocks, typ string) {
	var first *hcl.Block
	for _, b := range blocks {
		if b.Type != typ {
			continue
		}
		if first == nil {
			first = b
			continue
		}
		d.Errorf(b.DefRange, "Duplicate "+typ+" block", "A partitions file has at most one %s block; the first is at %s. Merge them.", typ, hclattr.Pos(first.DefRange))
	}
}

func (d *decoder) partition(b *hcl.Block, accounts map[string]hcl.Range) (Partition, bool) {
	p := Partition{Name: b.Labels[0], GPUQuantum: DefaultGPUQuantum, MaxOutput: DefaultMaxOutput}
	if !nameRe(p.Name) {
		d.Errorf(b.LabelRanges[0], "Invalid partition name", "Partition name %q is not valid; a name starts with a letter and holds letters, digits, '_' and '-'.", p.Name)
	}
	ct, attrs := d.attrs(b.Body, partitionSchema)
	var isDefault bool
	attrs.Bool("default", &isDefault)
	if a, ok := attrs.Strings("nodes", &p.Nodes); ok {
		d.nodePatterns(a, p.Nodes)
	}
	attrs.Strings("labels", &p.Labels)
	if attrs.Get("nodes") == nil && attrs.Get("labels") == nil {
		d.Errorf(b.DefRange, "Partition without nodes", `Partition %q names no nodes; set nodes (names, ranges such as "gpu[01-16]", or "*" for every node) or labels.`, p.Name)
	}
	maxA, _ := d.duration(attrs, "max_walltime", &p.MaxWalltime, false)
	if a, ok := d.duration(attrs, "default_walltime", &p.DefaultWalltime, false); ok && maxA != nil && p.MaxWalltime > 0 && p.DefaultWalltime > p.MaxWalltime {
		d.Errorf(a.Expr.Range(), "Default walltime above the maximum", "default_walltime %s exceeds max_walltime %s (at %s); jobs without a walltime would be refused.",
			units.FormatDuration(p.DefaultWalltime), units.FormatDuration(p.MaxWalltime), hclattr.Pos(maxA.Expr.Range()))
	}
	if a, ok := attrs.Whole("max_cluster_size", &p.MaxClusterSize); ok && (p.MaxClusterSize < 1 || p.MaxClusterSize > jobspec.MaxClusterSize) {
		d.Errorf(a.Expr.Range(), "Invalid max_cluster_size", "max_cluster_size %d is not valid; it is between 1 and %d, the most containers one session's network holds.", p.MaxClusterSize, jobspec.MaxClusterSize)
	}
	attrs.Whole("priority_tier", &p.PriorityTier)
	if a, ok := attrs.Strings("allowed_accounts", &p.AllowedAccounts); ok {
		d.known(a, p.AllowedAccounts, accounts, "account")
	}
	if a, ok := attrs.Strings("allowed_modes", &p.AllowedModes); ok {
		for i, m := range p.AllowedModes {
			if m != jobspec.ModeSingleNode && m != jobspec.ModeMultiNode {
				d.Errorf(hclattr.ElemRange(a, i), "Invalid cluster mode", "allowed_modes holds %q; the modes are %q and %q.", m, jobspec.ModeSingleNode, jobspec.ModeMultiNode)
			}
		}
	}
	if a, ok := attrs.Number("gpu_quantum", &p.GPUQuantum); ok {
		steps := 1 / p.GPUQuantum
		if !(p.GPUQuantum > 0 && p.GPUQuantum <= 1) || math.Abs(steps-math.Round(steps)) > 1e-9 {
			d.Errorf(a.Expr.Range(), "Invalid gpu_quantum", "gpu_quantum %g is not valid; it is a fraction of one GPU that divides it evenly, such as 0.1, 0.25, 0.5 or 1.", p.GPUQuantum)
		}
	}
	attrs.Bool("requeue", &p.Requeue)
	d.memory(attrs, "max_output", &p.MaxOutput)
	d.starvation(attrs, &p.StarvationThreshold)
	d.preemptSettings(attrs, &p)
	for _, lb := range ct.Blocks {
		switch lb.Type {
		case "user_limits":
			d.limits(lb, &p.UserLimits)
		case "network":
			egress := true
			_, na := d.attrs(lb.Body, networkSchema)
			na.Bool("egress", &egress)
			p.NoEgress = !egress
		}
	}
	d.once(ct.Blocks, "user_limits")
	d.once(ct.Blocks, "network")
	return p, isDefault
}

func (d *decoder) nodePatterns(a *hcl.Attribute, pats []string) {
	for i, pat := range pats {
		rng := hclattr.ElemRange(a, i)
		if isGlob(pat) {
			if strings.ContainsAny(pat, "[]") {
				d.Errorf(rng, "Invalid node pattern", "%q mixes a glob (* or ?) with a range; write one or the other.", pat)
			} else if _, err := pathMatch(pat); err != nil {
				d.Errorf(rng, "Invalid node pattern", "%q is not a valid glob: %v.", pat, err)
			}
			continue
		}
		if _, err := Expand(pat); err != nil {
			d.Errorf(rng, "Invalid node range", "%s; write names, ranges such as \"gpu[01-16]\" or \"n[1-4,8]\", or globs such as \"cpu*\".", strings.TrimPrefix(err.Error(), ErrRange.Error()+": "))
		}
	}
}

func (d *decoder) known(a *hcl.Attribute, names []string, defined map[string]hcl.Range, what string) {
	for i, n := range names {
		if _, ok := defined[n]; !ok {
			d.Errorf(hclattr.ElemRange(a, i), "Unknown "+what, "%s %q is not defined in this file; known %ss: %s.", what, n, what, listOrNone(sortedKeys(defined)))
		}
	}
}

func (d *decoder) limits(b *hcl.Block, l *Limits) {
	_, attrs := d.attrs(b.Body, limitsSchema)
	for _, name := range []string{"max_jobs", "max_submit_jobs"} {
		dst := &l.MaxJobs
		if name == "max_submit_jobs" {
			dst = &l.MaxSubmitJobs
		}
		if a, ok := attrs.Whole(name, dst); ok && *dst < 1 {
			d.Errorf(a.Expr.Range(), "Invalid "+name, "%s %d is not valid; it is at least 1 (leave it out for no limit).", name, *dst)
		}
	}
	for _, name := range []string{"max_cpu", "max_gpu"} {
		dst := &l.MaxCPU
		if name == "max_gpu" {
			dst = &l.MaxGPU
		}
		switch a, ok := attrs.Number(name, dst); {
		case ok && !(*dst > 0):
			d.Errorf(a.Expr.Range(), "Invalid "+name, "%s %g is not valid; it is above 0 (leave it out for no limit).", name, *dst)
		case ok && name == "max_cpu" && units.MilliCPU(*dst) < units.MinCPUMilli:
			// Counted in millicores as jobs are, a smaller limit is 0 (none)
			// or below every job's cpu.
			d.Errorf(a.Expr.Range(), "Invalid "+name, "%s %g is not valid; it is at least %g, the least cpu a container may have (leave it out for no limit).", name, *dst, jobspec.MinCPU)
		}
	}
	d.memory(attrs, "max_memory", &l.MaxMemory)
}

func (d *decoder) account(b *hcl.Block, seen, users map[string]hcl.Range) (Account, bool) {
	a := Account{Name: b.Labels[0], Shares: 1}
	ok := true
	if !nameRe(a.Name) {
		d.Errorf(b.LabelRanges[0], "Invalid account name", "Account name %q is not valid; a name starts with a letter and holds letters, digits, '_' and '-'.", a.Name)
	}
	if first, dup := seen[a.Name]; dup {
		d.Errorf(b.LabelRanges[0], "Duplicate account", "Account %q was already defined at %s; account names are unique in the whole tree.", a.Name, hclattr.Pos(first))
		ok = false
	} else {
		seen[a.Name] = b.LabelRanges[0]
	}
	ct, attrs := d.attrs(b.Body, accountSchema)
	d.shares(attrs, &a.Shares)
	d.defaultQOS(attrs, &a.DefaultQOS)
	var listed []string
	la, _ := attrs.Strings("users", &listed)
	inAcct := map[string]hcl.Range{}
	addUser := func(u User, rng hcl.Range) {
		if first, dup := inAcct[u.Name]; dup {
			d.Errorf(rng, "Duplicate user", "User %q is already a member of account %q (at %s).", u.Name, a.Name, hclattr.Pos(first))
			return
		}
		inAcct[u.Name] = rng
		a.Users = append(a.Users, u)
	}
	for i, u := range listed {
		addUser(User{Name: u, Shares: 1}, hclattr.ElemRange(la, i))
	}
	for _, cb := range ct.Blocks {
		switch cb.Type {
		case "user":
			u := User{Name: cb.Labels[0], Shares: 1}
			_, attrs := d.attrs(cb.Body, userSchema)
			d.shares(attrs, &u.Shares)
			attrs.Bool("default", &u.Default)
			if u.Default {
				if first, dup := users[u.Name]; dup {
					d.Errorf(cb.LabelRanges[0], "Two default accounts", "User %q already has a default account (at %s); a user has one.", u.Name, hclattr.Pos(first))
				} else {
					users[u.Name] = cb.LabelRanges[0]
				}
			}
			addUser(u, cb.LabelRanges[0])
		case "account":
			if child, ok := d.account(cb, seen, users); ok {
				a.Children = append(a.Children, child)
			}
		}
	}
	return a, ok
}

func (d *decoder) shares(attrs hclattr.Attrs, dst *float64) {
	if a, ok := attrs.Number("shares", dst); ok && !(*dst > 0) {
		d.Errorf(a.Expr.Range(), "Invalid shares", "shares %g is not valid; shares are above 0.", *dst)
	}
}

func (d *decoder) priority(b *hcl.Block, w *Weights) {
	_, attrs := d.attrs(b.Body, prioritySchema)
	for _, f := range []struct {
		name string
		dst  *float64
	}{{"age", &w.Age}, {"fair_share", &w.FairShare}, {"job_size", &w.JobSize}, {"tier", &w.Tier}, {"qos", &w.QOS}} {
		if a, ok := attrs.Number(f.name, f.dst); ok && (*f.dst < 0 || *f.dst > 1e9) {
			d.Errorf(a.Expr.Range(), "Invalid weight", "weight %s = %g is not valid; weights are between 0 and 1e9.", f.name, *f.dst)
		}
	}
	attrs.Bool("favor_small", &w.FavorSmall)
	if a, ok := d.duration(attrs, "max_age", &w.MaxAge, false); ok && w.MaxAge == 0 {
		d.Errorf(a.Expr.Range(), "Invalid max_age", "max_age is the wait at which the age factor reaches 1; it is above 0.")
	}
}

func (d *decoder) billing(b *hcl.Block, bl *Billing) {
	_, attrs := d.attrs(b.Body, billingSchema)
	for _, f := range []struct {
		name string
		dst  *float64
	}{{"cpu", &bl.CPU}, {"memory", &bl.Memory}, {"gpu", &bl.GPU}} {
		if a, ok := attrs.Number(f.name, f.dst); ok && !(*f.dst >= 0 && *f.dst <= 1e9) {
			d.Errorf(a.Expr.Range(), "Invalid billing weight", "billing weight %s = %g is not valid; it is between 0 and 1e9.", f.name, *f.dst)
		}
	}
}

// duration reads a time such as "2h", "7d" or Slurm's "2-00:00:00".
func (d *decoder) duration(attrs hclattr.Attrs, name string, dst *time.Duration, zeroOK bool) (*hcl.Attribute, bool) {
	var s string
	a, ok := attrs.String(name, &s)
	if !ok {
		return a, false
	}
	v, err := jobspec.ParseWalltime(s)
	if err != nil || v < 0 || (v == 0 && !zeroOK) {
		d.Errorf(a.Expr.Range(), "Invalid "+name, `%s %q is not valid; write a positive duration such as "90m", "12h", "7d" or "2-00:00:00".`, name, s)
		return a, false
	}
	*dst = v
	return a, true
}

// starvation reads starvation_threshold: a positive duration, or "off"
// (stored as -1).
func (d *decoder) starvation(attrs hclattr.Attrs, dst *time.Duration) {
	var s string
	a, ok := attrs.String("starvation_threshold", &s)
	if !ok {
		return
	}
	if s == "off" {
		*dst = -1
		return
	}
	v, err := jobspec.ParseWalltime(s)
	if err != nil || v <= 0 {
		d.Errorf(a.Expr.Range(), "Invalid starvation_threshold", `starvation_threshold %q is not valid; write a positive duration such as "6h", "90m" or "2d", or "off".`, s)
		return
	}
	*dst = v
}

// memory reads a size: a string such as "512GiB", or a number of bytes.
func (d *decoder) memory(attrs hclattr.Attrs, name string, dst *int64) {
	v, a, ok := attrs.Value(name, cty.DynamicPseudoType)
	if !ok {
		return
	}
	var n int64
	var err error
	switch v.Type() {
	case cty.String:
		n, err = jobspec.ParseMemory(v.AsString())
	case cty.Number:
		f, _ := v.AsBigFloat().Float64()
		n = int64(f)
	default:
		err = fmt.Errorf("not a size")
	}
	if err != nil || n <= 0 {
		d.Errorf(a.Expr.Range(), "Invalid "+a.Name, `%s is not a valid size; write a number with a unit, such as "512GiB" or "2TiB".`, a.Name)
		return
	}
	*dst = n
}

func nameRe(s string) bool {
	if s == "" || len(s) > 63 || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	return validNodeName(s) && !strings.Contains(s, ".")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// tidy drops repeated diagnostics and sorts the rest by position.
func tidy(diags hcl.Diagnostics) hcl.Diagnostics {
	seen := map[string]bool{}
	var out hcl.Diagnostics
	for _, d := range diags {
		k := d.Summary + "\x00" + d.Detail
		if d.Subject != nil {
			k += fmt.Sprintf("\x00%d", d.Subject.Start.Byte)
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, d)
		}
	}
	slices.SortStableFunc(out, func(a, b *hcl.Diagnostic) int {
		ab, bb := -1, -1
		if a.Subject != nil {
			ab = a.Subject.Start.Byte
		}
		if b.Subject != nil {
			bb = b.Subject.Start.Byte
		}
		return ab - bb
	})
	return out
}
