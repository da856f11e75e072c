package jobspec

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Defaults Parse fills for settings a job file leaves out.
const (
	DefaultClusterSize = 1
	DefaultClusterMode = ModeSingleNode
	DefaultCPU         = 1.0
	DefaultMemory      = int64(1 << 30) // 1 GiB
	DefaultWorkdir     = "/home/work"
)

var (
	jobSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "partition"}, {Name: "account"}, {Name: "walltime"}, {Name: "priority"},
			{Name: "requeue"}, {Name: "ssh"}, {Name: "image"}, {Name: "command"}, {Name: "workdir"}, {Name: "env"}, {Name: "output"}, {Name: "error"},
		},
		Blocks: []hcl.BlockHeaderSchema{
			{Type: "cluster"}, {Type: "resources"}, {Type: "array"}, {Type: "mail"},
			{Type: "mount", LabelNames: []string{"name"}},
			{Type: "role", LabelNames: []string{"name"}},
			{Type: "service", LabelNames: []string{"name"}},
		},
	}
	serviceSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "port", Required: true}, {Name: "protocol"}, {Name: "keep_prefix"}},
	}
	clusterSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "size"}, {Name: "mode"}},
	}
	arraySchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "range", Required: true}, {Name: "max_running"}},
	}
	resourcesSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "cpu"}, {Name: "memory"}, {Name: "gpu"}},
	}
	mailSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "to"}, {Name: "begin"}, {Name: "end"}, {Name: "fail"}},
	}
	mountSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "source", Required: true}, {Name: "target", Required: true}, {Name: "readonly"},
		},
	}
	roleSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "replicas"}, {Name: "command"}, {Name: "image"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "resources"}},
	}
)

// decoder evaluates attributes, collecting diagnostics and the range of
// every value it reads.
type decoder struct {
	ctx    *hcl.EvalContext
	diags  hcl.Diagnostics
	ranges map[string]hcl.Range
	failed map[string]bool // paths already reported, for Validate to skip
}

// decodeJob decodes a job block; Validate checks the result.
func decodeJob(block *hcl.Block, ctx *hcl.EvalContext) (*Job, map[string]bool, hcl.Diagnostics) {
	d := &decoder{ctx: ctx, failed: map[string]bool{}, ranges: map[string]hcl.Range{
		"":     block.DefRange,
		"name": block.LabelRanges[0],
	}}
	j := &Job{
		Name:      block.Labels[0],
		Cluster:   Cluster{Size: DefaultClusterSize, Mode: DefaultClusterMode},
		Resources: Resources{CPU: DefaultCPU, Memory: DefaultMemory},
		Workdir:   DefaultWorkdir,
		Ranges:    d.ranges,
	}
	content, diags := bodyContent(block.Body, jobSchema)
	d.diags = diags
	attrs := content.Attributes
	d.str(attrs, "partition", "partition", &j.Partition)
	d.str(attrs, "account", "account", &j.Account)
	d.walltime(attrs, j)
	d.whole(attrs, "priority", "priority", &j.Priority)
	d.boolean(attrs, "requeue", "requeue", &j.Requeue)
	d.boolean(attrs, "ssh", "ssh", &j.SSH)
	d.str(attrs, "image", "image", &j.Image)
	d.strList(attrs, "command", "command", &j.Command)
	d.str(attrs, "workdir", "workdir", &j.Workdir)
	d.env(attrs, j)
	d.str(attrs, "output", "output", &j.Output)
	d.str(attrs, "error", "error", &j.Error)

	blocks := content.Blocks.ByType()
	sizeSet := false
	if b := d.single(blocks["cluster"]); b != nil {
		d.ranges["cluster"] = b.DefRange
		c, diags := bodyContent(b.Body, clusterSchema)
		d.diags = append(d.diags, diags...)
		sizeSet = d.whole(c.Attributes, "size", "cluster.size", &j.Cluster.Size)
		d.str(c.Attributes, "mode", "cluster.mode", &j.Cluster.Mode)
	}
	if b := d.single(blocks["resources"]); b != nil {
		d.resources(b, "resources", &j.Resources)
	}
	if b := d.single(blocks["array"]); b != nil {
		d.ranges["array"] = b.DefRange
		c, diags := bodyContent(b.Body, arraySchema)
		d.diags = append(d.diags, diags...)
		j.Array = &Array{}
		d.str(c.Attributes, "range", "array.range", &j.Array.Range)
		d.whole(c.Attributes, "max_running", "array.max_running", &j.Array.MaxRunning)
	}
	if b := d.single(blocks["mail"]); b != nil {
		d.ranges["mail"] = b.DefRange
		c, diags := bodyContent(b.Body, mailSchema)
		d.diags = append(d.diags, diags...)
		m := &Mail{}
		d.str(c.Attributes, "to", "mail.to", &m.To)
		d.boolean(c.Attributes, "begin", "mail.begin", &m.Begin)
		d.boolean(c.Attributes, "end", "mail.end", &m.End)
		d.boolean(c.Attributes, "fail", "mail.fail", &m.Fail)
		j.Mail = m
	}
	for i, b := range blocks["mount"] {
		j.Mounts = append(j.Mounts, d.mount(b, fmt.Sprintf("mounts.%d", i)))
	}
	var replicasSet []bool
	for i, b := range blocks["role"] {
		r, set := d.role(b, fmt.Sprintf("roles.%d", i), j)
		j.Roles = append(j.Roles, r)
		replicasSet = append(replicasSet, set)
	}
	d.resolveSize(j, sizeSet, replicasSet)
	for i, b := range blocks["service"] {
		j.Services = append(j.Services, d.service(b, fmt.Sprintf("services.%d", i)))
	}
	return j, d.failed, d.diags
}

// fail reports diag for the value at path, which Validate then skips.
func (d *decoder) fail(path string, diag *hcl.Diagnostic) {
	d.diags = append(d.diags, diag)
	d.failed[path] = true
}

// single returns the one block of a type, reporting any more.
func (d *decoder) single(blocks []*hcl.Block) *hcl.Block {
	if len(blocks) == 0 {
		return nil
	}
	for _, b := range blocks[1:] {
		d.diags = append(d.diags, errorAt(b.DefRange.Ptr(), fmt.Sprintf("Duplicate %s block", b.Type),
			"A job has at most one %s block; the first is at %s. Merge them.", b.Type, posString(blocks[0].DefRange)))
	}
	return blocks[0]
}

// eval evaluates attribute name as type ty, recording its range under
// path. ok is false when the attribute is absent or null (both mean
// "not set"), when evaluating it failed (reported), or when its value
// depends on an earlier error.
func (d *decoder) eval(attrs hcl.Attributes, name, path string, ty cty.Type) (v cty.Value, a *hcl.Attribute, ok bool) {
	a = attrs[name]
	if a == nil {
		return cty.NilVal, nil, false
	}
	d.ranges[path] = a.Expr.Range()
	v, diags := a.Expr.Value(d.ctx)
	d.diags = append(d.diags, diags...)
	if diags.HasErrors() || !v.IsWhollyKnown() {
		d.failed[path] = true
		return cty.NilVal, a, false
	}
	if v.IsNull() {
		return cty.NilVal, a, false
	}
	v, err := convert.Convert(v, ty)
	if err != nil {
		d.diags = append(d.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Incorrect attribute value type",
			Detail:   fmt.Sprintf("Inappropriate value for attribute %q: %s.", name, err),
			Subject:  a.Expr.Range().Ptr(),
			Context:  a.Range.Ptr(),
		})
		d.failed[path] = true
		return cty.NilVal, a, false
	}
	return v, a, true
}

func (d *decoder) str(attrs hcl.Attributes, name, path string, dst *string) bool {
	v, _, ok := d.eval(attrs, name, path, cty.String)
	if ok {
		*dst = v.AsString()
	}
	return ok
}

func (d *decoder) boolean(attrs hcl.Attributes, name, path string, dst *bool) bool {
	v, _, ok := d.eval(attrs, name, path, cty.Bool)
	if ok {
		*dst = v.True()
	}
	return ok
}

func (d *decoder) number(attrs hcl.Attributes, name, path string, dst *float64) bool {
	v, _, ok := d.eval(attrs, name, path, cty.Number)
	if ok {
		*dst, _ = v.AsBigFloat().Float64()
	}
	return ok
}

// whole reads a whole number that fits an int32.
func (d *decoder) whole(attrs hcl.Attributes, name, path string, dst *int) bool {
	v, a, ok := d.eval(attrs, name, path, cty.Number)
	if !ok {
		return false
	}
	bf := v.AsBigFloat()
	i, acc := bf.Int64()
	if !bf.IsInt() || acc != big.Exact || i != int64(int32(i)) {
		d.fail(path, errorAt(a.Expr.Range().Ptr(), "Invalid "+name,
			"%s %s is not valid; it must be a whole number.", name, bf.Text('g', -1)))
		return false
	}
	*dst = int(i)
	return true
}

func (d *decoder) strList(attrs hcl.Attributes, name, path string, dst *[]string) bool {
	v, a, ok := d.eval(attrs, name, path, cty.List(cty.String))
	if !ok {
		return false
	}
	out := make([]string, 0, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() {
			d.fail(path, errorAt(a.Expr.Range().Ptr(), "Invalid "+name,
				"%s holds a null element; every element must be a string.", name))
			return false
		}
		out = append(out, e.AsString())
	}
	if elems, diags := hcl.ExprList(a.Expr); !diags.HasErrors() && len(elems) == len(out) {
		for i, e := range elems {
			d.ranges[path+"."+strconv.Itoa(i)] = e.Range()
		}
	}
	*dst = out
	return true
}

func (d *decoder) walltime(attrs hcl.Attributes, j *Job) {
	var s string
	if !d.str(attrs, "walltime", "walltime", &s) {
		return
	}
	rng := d.ranges["walltime"]
	w, err := ParseWalltime(s)
	switch {
	case err != nil:
		d.fail("walltime", errorAt(&rng, "Invalid walltime",
			"walltime %q is not valid; %s.", s, walltimeHelp))
	case w == 0:
		d.diags = append(d.diags, errorAt(&rng, "Invalid walltime",
			"walltime %q is zero; give a positive limit, or leave walltime out for the partition's default.", s))
	default:
		j.Walltime = w
	}
}

func (d *decoder) env(attrs hcl.Attributes, j *Job) {
	v, a, ok := d.eval(attrs, "env", "env", cty.Map(cty.String))
	if !ok {
		return
	}
	j.Env = map[string]string{}
	for k, e := range v.AsValueMap() {
		if e.IsNull() {
			d.diags = append(d.diags, errorAt(a.Expr.Range().Ptr(), "Invalid env",
				"env %s is null; every value must be a string.", k))
			continue
		}
		j.Env[k] = e.AsString()
	}
	// Point at each key where the map is written out.
	if pairs, diags := hcl.ExprMap(a.Expr); !diags.HasErrors() {
		for _, p := range pairs {
			if k, diags := p.Key.Value(d.ctx); !diags.HasErrors() && k.Type() == cty.String && k.IsKnown() && !k.IsNull() {
				d.ranges["env."+k.AsString()] = p.Key.Range()
			}
		}
	}
}

// resources decodes a resources block over res, which holds the values
// it inherits.
func (d *decoder) resources(b *hcl.Block, path string, res *Resources) {
	d.ranges[path] = b.DefRange
	c, diags := bodyContent(b.Body, resourcesSchema)
	d.diags = append(d.diags, diags...)
	attrs := c.Attributes
	d.number(attrs, "cpu", path+".cpu", &res.CPU)
	d.number(attrs, "gpu", path+".gpu", &res.GPU)
	v, a, ok := d.eval(attrs, "memory", path+".memory", cty.DynamicPseudoType)
	if !ok {
		return
	}
	rng := a.Expr.Range()
	var err error
	var n int64
	switch v.Type() {
	case cty.String:
		n, err = ParseMemory(v.AsString())
	case cty.Number:
		n, err = memoryValue(v.AsBigFloat())
	default:
		d.fail(path+".memory", errorAt(&rng, "Invalid memory",
			"memory must be a string or a number, not %s; %s.", v.Type().FriendlyName(), memoryHelp))
		return
	}
	if err != nil {
		d.fail(path+".memory", errorAt(&rng, "Invalid memory",
			"memory %s is not valid; %s.", showValue(v), memoryHelp))
		return
	}
	if n > 0 && n < 1<<20 {
		d.diags = append(d.diags, warningAt(&rng, "Very little memory",
			"memory %s is %d bytes; a number without a unit counts bytes. Did you mean %q?",
			showValue(v), n, strconv.FormatInt(n, 10)+"MiB"))
	}
	res.Memory = n
}

func (d *decoder) mount(b *hcl.Block, path string) Mount {
	m := Mount{Name: b.Labels[0]}
	d.ranges[path] = b.DefRange
	d.ranges[path+".name"] = b.LabelRanges[0]
	c, diags := bodyContent(b.Body, mountSchema)
	d.diags = append(d.diags, diags...)
	for _, name := range []string{"source", "target"} {
		if c.Attributes[name] == nil {
			d.failed[path+"."+name] = true // hcl reported it missing
		}
	}
	d.str(c.Attributes, "source", path+".source", &m.Source)
	d.str(c.Attributes, "target", path+".target", &m.Target)
	d.boolean(c.Attributes, "readonly", path+".readonly", &m.ReadOnly)
	return m
}

func (d *decoder) service(b *hcl.Block, path string) Service {
	s := Service{Name: b.Labels[0], Protocol: ProtocolHTTP}
	d.ranges[path] = b.DefRange
	d.ranges[path+".name"] = b.LabelRanges[0]
	c, diags := b.Body.Content(serviceSchema)
	d.diags = append(d.diags, diags...)
	if c.Attributes["port"] == nil {
		d.failed[path+".port"] = true // hcl reported it missing
	}
	d.whole(c.Attributes, "port", path+".port", &s.Port)
	d.str(c.Attributes, "protocol", path+".protocol", &s.Protocol)
	d.boolean(c.Attributes, "keep_prefix", path+".keep_prefix", &s.KeepPrefix)
	return s
}

// role decodes a role block. Its resources start from the job's. set
// says whether the block gives replicas.
func (d *decoder) role(b *hcl.Block, path string, j *Job) (r Role, set bool) {
	r = Role{Name: b.Labels[0]}
	d.ranges[path] = b.DefRange
	d.ranges[path+".name"] = b.LabelRanges[0]
	c, diags := bodyContent(b.Body, roleSchema)
	d.diags = append(d.diags, diags...)
	set = d.whole(c.Attributes, "replicas", path+".replicas", &r.Replicas)
	if _, given := c.Attributes["replicas"]; given {
		set = true
	}
	d.strList(c.Attributes, "command", path+".command", &r.Command)
	d.str(c.Attributes, "image", path+".image", &r.Image)
	if rb := d.single(c.Blocks.OfType("resources")); rb != nil {
		res := j.Resources
		d.resources(rb, path+".resources", &res)
		r.Resources = &res
	}
	if !set && r.Name != RoleSub {
		r.Replicas = 1 // main has one; other roles default to one
	}
	return r, set
}

// resolveSize settles cluster.size against the roles. When no role block
// gives replicas (main aside), size is as written and the subs fill it.
// Otherwise the session is main1 plus the replicas of the other roles; a
// size written in the file must equal that total, and a size left out
// becomes it.
func (d *decoder) resolveSize(j *Job, sizeSet bool, replicasSet []bool) {
	explicit, total := false, 1
	var parts []string
	sub := -1
	for i, r := range j.Roles {
		switch {
		case r.Name == RoleMain:
			continue
		case r.Name == RoleSub:
			sub = i
			if !replicasSet[i] {
				continue
			}
		}
		explicit = true
		total += max(r.Replicas, 0)
		parts = append(parts, fmt.Sprintf("%s %d", r.Name, r.Replicas))
	}
	if !explicit {
		if sub >= 0 {
			j.Roles[sub].Replicas = max(j.Cluster.Size-1, 0)
		}
		return
	}
	if sizeSet && j.Cluster.Size != total {
		hint := ""
		if n := j.Cluster.Size - total; n > 0 && (sub < 0 || !replicasSet[sub]) {
			hint = fmt.Sprintf(`, or add role "sub" { replicas = %d } to fill the rest with subs`, n)
		}
		rng := d.ranges["cluster.size"]
		d.diags = append(d.diags, errorAt(&rng, "Cluster size does not match roles",
			"cluster size is %d, but the roles add up to %d containers (main 1, %s); set size = %d or leave size out%s.",
			j.Cluster.Size, total, strings.Join(parts, ", "), total, hint))
	}
	j.Cluster.Size = total
}

// showValue writes a value the way it would appear in a job file.
func showValue(v cty.Value) string {
	switch {
	case v.Type() == cty.String:
		return strconv.Quote(v.AsString())
	case v.Type() == cty.Number:
		return v.AsBigFloat().Text('g', -1)
	}
	return v.GoString()
}
