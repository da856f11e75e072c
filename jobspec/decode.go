package jobspec

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/troupe-hpc/troupe/internal/hclattr"
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
			{Name: "partition"}, {Name: "account"}, {Name: "qos"}, {Name: "walltime"}, {Name: "priority"},
			{Name: "requeue"}, {Name: "reservation"}, {Name: "ssh"}, {Name: "image"}, {Name: "command"}, {Name: "workdir"}, {Name: "env"}, {Name: "output"}, {Name: "error"},
			{Name: "signal"},
			{Name: "licenses"},
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

// decoder evaluates attributes, collecting diagnostics, the range of
// every value it reads (Ranges) and the paths already reported broken
// (Failed), for Validate to skip.
type decoder struct {
	hclattr.Decoder
}

// decodeJob decodes a job block; Validate checks the result.
func decodeJob(block *hcl.Block, ctx *hcl.EvalContext) (*Job, map[string]bool, hcl.Diagnostics) {
	d := &decoder{hclattr.Decoder{Ctx: ctx, Failed: map[string]bool{}, Ranges: map[string]hcl.Range{
		"":     block.DefRange,
		"name": block.LabelRanges[0],
	}}}
	j := &Job{
		Name:      block.Labels[0],
		Cluster:   Cluster{Size: DefaultClusterSize, Mode: DefaultClusterMode},
		Resources: Resources{CPU: DefaultCPU, Memory: DefaultMemory},
		Workdir:   DefaultWorkdir,
		Ranges:    d.Ranges,
	}
	content, diags := bodyContent(block.Body, jobSchema)
	d.Diags = diags
	attrs := d.Attrs(content.Attributes, "")
	attrs.String("partition", &j.Partition)
	attrs.String("account", &j.Account)
	attrs.String("qos", &j.QOS)
	attrs.String("reservation", &j.Reservation)
	d.walltime(attrs, j)
	attrs.Whole("priority", &j.Priority)
	attrs.Bool("requeue", &j.Requeue)
	attrs.Bool("ssh", &j.SSH)
	attrs.String("image", &j.Image)
	attrs.Strings("command", &j.Command)
	attrs.String("workdir", &j.Workdir)
	d.env(attrs, j)
	attrs.String("output", &j.Output)
	attrs.String("error", &j.Error)
	d.signal(attrs, j)
	d.licenses(attrs, j)

	blocks := content.Blocks.ByType()
	sizeSet := false
	if b := d.single(blocks["cluster"]); b != nil {
		c := d.block(b, "cluster", clusterSchema)
		_, sizeSet = c.Whole("size", &j.Cluster.Size)
		c.String("mode", &j.Cluster.Mode)
	}
	if b := d.single(blocks["resources"]); b != nil {
		d.resources(b, "resources", &j.Resources)
	}
	if b := d.single(blocks["array"]); b != nil {
		c := d.block(b, "array", arraySchema)
		j.Array = &Array{}
		c.String("range", &j.Array.Range)
		c.Whole("max_running", &j.Array.MaxRunning)
	}
	if b := d.single(blocks["mail"]); b != nil {
		c := d.block(b, "mail", mailSchema)
		m := &Mail{}
		c.String("to", &m.To)
		c.Bool("begin", &m.Begin)
		c.Bool("end", &m.End)
		c.Bool("fail", &m.Fail)
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
	return j, d.Failed, d.Diags
}

// block reads the content of block b, at path, against schema (with
// suggestions for unknown names): its attributes, read at path.
func (d *decoder) block(b *hcl.Block, path string, schema *hcl.BodySchema) hclattr.Attrs {
	d.Ranges[path] = b.DefRange
	c, diags := bodyContent(b.Body, schema)
	d.Diags = append(d.Diags, diags...)
	return d.Attrs(c.Attributes, path)
}

// single returns the one block of a type, reporting any more.
func (d *decoder) single(blocks []*hcl.Block) *hcl.Block {
	if len(blocks) == 0 {
		return nil
	}
	for _, b := range blocks[1:] {
		d.Diags = append(d.Diags, errorAt(b.DefRange.Ptr(), fmt.Sprintf("Duplicate %s block", b.Type),
			"A job has at most one %s block; the first is at %s. Merge them.", b.Type, posString(blocks[0].DefRange)))
	}
	return blocks[0]
}

func (d *decoder) walltime(attrs hclattr.Attrs, j *Job) {
	var s string
	if _, ok := attrs.String("walltime", &s); !ok {
		return
	}
	rng := d.Ranges["walltime"]
	w, err := ParseWalltime(s)
	switch {
	case err != nil:
		d.Fail("walltime", errorAt(&rng, "Invalid walltime",
			"walltime %q is not valid; %s.", s, walltimeHelp))
	case w == 0:
		d.Diags = append(d.Diags, errorAt(&rng, "Invalid walltime",
			"walltime %q is zero; give a positive limit, or leave walltime out for the partition's default.", s))
	default:
		j.Walltime = w
	}
}

func (d *decoder) env(attrs hclattr.Attrs, j *Job) {
	v, a, ok := attrs.Value("env", cty.Map(cty.String))
	if !ok {
		return
	}
	j.Env = map[string]string{}
	for k, e := range v.AsValueMap() {
		if e.IsNull() {
			d.Diags = append(d.Diags, errorAt(a.Expr.Range().Ptr(), "Invalid env",
				"env %s is null; every value must be a string.", k))
			continue
		}
		j.Env[k] = e.AsString()
	}
	// Point at each key where the map is written out.
	if pairs, diags := hcl.ExprMap(a.Expr); !diags.HasErrors() {
		for _, p := range pairs {
			if k, diags := p.Key.Value(d.Ctx); !diags.HasErrors() && k.Type() == cty.String && k.IsKnown() && !k.IsNull() {
				d.Ranges["env."+k.AsString()] = p.Key.Range()
			}
		}
	}
}

// resources decodes a resources block over res, which holds the values
// it inherits.
func (d *decoder) resources(b *hcl.Block, path string, res *Resources) {
	attrs := d.block(b, path, resourcesSchema)
	attrs.Number("cpu", &res.CPU)
	attrs.Number("gpu", &res.GPU)
	v, a, ok := attrs.Value("memory", cty.DynamicPseudoType)
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
		d.Fail(path+".memory", errorAt(&rng, "Invalid memory",
			"memory must be a string or a number, not %s; %s.", v.Type().FriendlyName(), memoryHelp))
		return
	}
	if err != nil {
		d.Fail(path+".memory", errorAt(&rng, "Invalid memory",
			"memory %s is not valid; %s.", showValue(v), memoryHelp))
		return
	}
	if n > 0 && n < 1<<20 {
		d.Diags = append(d.Diags, warningAt(&rng, "Very little memory",
			"memory %s is %d bytes; a number without a unit counts bytes. Did you mean %q?",
			showValue(v), n, strconv.FormatInt(n, 10)+"MiB"))
	}
	res.Memory = n
}

func (d *decoder) mount(b *hcl.Block, path string) Mount {
	m := Mount{Name: b.Labels[0]}
	d.Ranges[path+".name"] = b.LabelRanges[0]
	c := d.block(b, path, mountSchema)
	for _, name := range []string{"source", "target"} {
		if c.Get(name) == nil {
			d.Failed[c.Path(name)] = true // hcl reported it missing
		}
	}
	c.String("source", &m.Source)
	c.String("target", &m.Target)
	c.Bool("readonly", &m.ReadOnly)
	return m
}

func (d *decoder) service(b *hcl.Block, path string) Service {
	s := Service{Name: b.Labels[0], Protocol: ProtocolHTTP}
	d.Ranges[path] = b.DefRange
	d.Ranges[path+".name"] = b.LabelRanges[0]
	c := d.Attrs(d.Content(b.Body, serviceSchema).Attributes, path)
	if c.Get("port") == nil {
		d.Failed[c.Path("port")] = true // hcl reported it missing
	}
	c.Whole("port", &s.Port)
	c.String("protocol", &s.Protocol)
	c.Bool("keep_prefix", &s.KeepPrefix)
	return s
}

// role decodes a role block. Its resources start from the job's. set
// says whether the block gives replicas.
func (d *decoder) role(b *hcl.Block, path string, j *Job) (r Role, set bool) {
	r = Role{Name: b.Labels[0]}
	d.Ranges[path] = b.DefRange
	d.Ranges[path+".name"] = b.LabelRanges[0]
	c, diags := bodyContent(b.Body, roleSchema)
	d.Diags = append(d.Diags, diags...)
	attrs := d.Attrs(c.Attributes, path)
	// Given at all, replicas counts as set, even when it is broken.
	a, _ := attrs.Whole("replicas", &r.Replicas)
	set = a != nil
	attrs.Strings("command", &r.Command)
	attrs.String("image", &r.Image)
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
		rng := d.Ranges["cluster.size"]
		d.Diags = append(d.Diags, errorAt(&rng, "Cluster size does not match roles",
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
