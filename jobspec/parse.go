package jobspec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Options adjust parsing; the zero value is what Parse uses.
type Options struct {
	// Vars set variables by name, overriding their defaults, as
	// `bsub -var name=value` does. A value is taken as a string when the
	// variable's type is string or not declared; otherwise it is read as
	// an HCL expression ("4", "[\"a\", \"b\"]") and converted to the type.
	Vars map[string]string
	// Interactive allows main1 without a command: bsub -I gives it one
	// (a login shell, or the command line's).
	Interactive bool
}

// fileSchema is what may appear at the top level of a job file.
var fileSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "job", LabelNames: []string{"name"}},
		{Type: "locals"},
		{Type: "variable", LabelNames: []string{"name"}},
	},
}

// ParseFile reads the job file at path and parses it with Parse; a file
// whose name ends in ".json" is read as HCL's JSON syntax. Diagnostics
// name the file as path.
func ParseFile(path string) (*Job, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read job file",
			Detail:   err.Error(),
		}}
	}
	return Parse(path, src)
}

// Parse decodes and validates the job file src. filename names it in
// diagnostics and picks the syntax: HCL's JSON syntax when it ends in
// ".json", native HCL otherwise.
//
// The returned diagnostics hold every problem found, in source order,
// each with the range of the offending value. The Job is nil if and only
// if diags.HasErrors(); warnings may come with a Job.
func Parse(filename string, src []byte) (*Job, hcl.Diagnostics) {
	return ParseWith(filename, src, Options{})
}

// ParseWith is Parse with options.
func ParseWith(filename string, src []byte, opts Options) (*Job, hcl.Diagnostics) {
	file, diags := parseSource(filename, src)
	if diags.HasErrors() || file == nil {
		// Decoding a broken tree mostly repeats the syntax errors.
		return nil, tidy(diags)
	}
	job, more := decodeFile(file.Body, opts)
	diags = tidy(append(diags, more...))
	if diags.HasErrors() {
		return nil, diags
	}
	return job, diags
}

// parseSource parses src as JSON or native HCL, by filename.
func parseSource(filename string, src []byte) (*hcl.File, hcl.Diagnostics) {
	if strings.EqualFold(filepath.Ext(filename), ".json") {
		return hcljson.Parse(src, filename)
	}
	return hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
}

// decodeFile reads the top level: variables, locals, then the job.
func decodeFile(body hcl.Body, opts Options) (*Job, hcl.Diagnostics) {
	content, diags := bodyContent(body, fileSchema)
	var jobs, locals, vars []*hcl.Block
	for _, b := range content.Blocks {
		switch b.Type {
		case "job":
			jobs = append(jobs, b)
		case "locals":
			locals = append(locals, b)
		case "variable":
			vars = append(vars, b)
		}
	}
	varVals, d := decodeVariables(vars, opts.Vars)
	diags = append(diags, d...)
	ctx := evalContext(varVals, nil)
	localVals, d := decodeLocals(locals, ctx)
	diags = append(diags, d...)
	ctx = evalContext(varVals, localVals)

	switch {
	case len(jobs) == 0:
		rng := content.MissingItemRange
		diags = append(diags, errorAt(&rng, "Missing job block",
			`A job file holds one job block: job "NAME" { image = "...", command = [...] }.`))
		return nil, diags
	case len(jobs) > 1:
		for _, b := range jobs[1:] {
			diags = append(diags, errorAt(b.DefRange.Ptr(), "Duplicate job block",
				"A job file holds exactly one job block; the first is at %s. Submit each job from its own file.",
				posString(jobs[0].DefRange)))
		}
	}
	job, failed, d := decodeJob(jobs[0], ctx)
	diags = append(diags, d...)
	if opts.Interactive && job.mainCommand() == nil {
		if failed == nil {
			failed = map[string]bool{}
		}
		failed["command"] = true
	}
	diags = append(diags, job.validate(failed)...)
	return job, diags
}

// variableBlock is the body of a variable "NAME" block.
type variableBlock struct {
	Type        *hcl.Attribute
	Default     *hcl.Attribute
	Description string
}

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "type"}, {Name: "default"}, {Name: "description"}},
}

// decodeVariableBlock reads a variable block's body. It is decoded by
// hand, not with gohcl, whose hclwrite import links go-cmp (and its
// package initialisation) into every tool that parses job files.
func decodeVariableBlock(body hcl.Body) (variableBlock, hcl.Diagnostics) {
	var vb variableBlock
	c, diags := bodyContent(body, variableSchema)
	if diags.HasErrors() {
		return vb, diags
	}
	vb.Type, vb.Default = c.Attributes["type"], c.Attributes["default"]
	if a := c.Attributes["description"]; a != nil {
		v, d := a.Expr.Value(nil)
		diags = append(diags, d...)
		if d.HasErrors() {
			return vb, diags
		}
		s, err := convert.Convert(v, cty.String)
		if err == nil && (s.IsNull() || !s.IsKnown()) {
			err = errors.New("a string is required")
		}
		if err != nil {
			return vb, append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unsuitable value type",
				Detail:   fmt.Sprintf("Unsuitable value for description: %s", err),
				Subject:  a.Expr.StartRange().Ptr(),
				Context:  a.Expr.Range().Ptr(),
			})
		}
		vb.Description = s.AsString()
	}
	return vb, diags
}

// decodeVariables evaluates variable blocks (with overrides) into the
// attributes of var.
func decodeVariables(blocks []*hcl.Block, overrides map[string]string) (map[string]cty.Value, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	vals := map[string]cty.Value{}
	where := map[string]hcl.Range{}
	for _, b := range blocks {
		name := b.Labels[0]
		if !hclsyntax.ValidIdentifier(name) {
			diags = append(diags, errorAt(b.LabelRanges[0].Ptr(), "Invalid variable name",
				"Variable name %q is not valid; a name starts with a letter and holds letters, digits, _ and -.", name))
			continue
		}
		if first, dup := where[name]; dup {
			diags = append(diags, errorAt(b.LabelRanges[0].Ptr(), "Duplicate variable",
				"Variable %q was already declared at %s; give each variable one block.", name, posString(first)))
			continue
		}
		where[name] = b.DefRange
		vb, d := decodeVariableBlock(b.Body)
		if d.HasErrors() {
			diags = append(diags, d...)
			vals[name] = cty.DynamicVal
			continue
		}
		ty := cty.DynamicPseudoType
		if vb.Type != nil {
			t, d := typeexpr.TypeConstraint(vb.Type.Expr)
			diags = append(diags, d...)
			if !d.HasErrors() {
				ty = t
			}
		}
		val, d := variableValue(name, b, &vb, ty, overrides)
		diags = append(diags, d...)
		vals[name] = val
	}
	for _, name := range sortedKeys(overrides) {
		if _, ok := where[name]; !ok {
			diags = append(diags, errorAt(nil, "Undeclared variable",
				"A value was given for variable %q, but the job file declares no variable %q; declare it with a variable %q block.",
				name, name, name))
		}
	}
	return vals, diags
}

// variableValue is a variable's value: its override or its default,
// converted to its type.
func variableValue(name string, b *hcl.Block, vb *variableBlock, ty cty.Type, overrides map[string]string) (cty.Value, hcl.Diagnostics) {
	var val cty.Value
	rng := b.DefRange
	if s, ok := overrides[name]; ok {
		if ty == cty.String || ty == cty.DynamicPseudoType {
			val = cty.StringVal(s)
		} else {
			expr, d := hclsyntax.ParseExpression([]byte(s), "-var "+name, hcl.InitialPos)
			if d.HasErrors() {
				return cty.DynamicVal, d
			}
			v, d := expr.Value(evalContext(nil, nil))
			if d.HasErrors() {
				return cty.DynamicVal, d
			}
			val, rng = v, expr.Range()
		}
	} else if vb.Default != nil {
		v, d := vb.Default.Expr.Value(evalContext(nil, nil))
		if d.HasErrors() {
			return cty.DynamicVal, d
		}
		val, rng = v, vb.Default.Expr.Range()
	} else {
		return cty.DynamicVal, hcl.Diagnostics{errorAt(b.DefRange.Ptr(), "Missing variable value",
			"Variable %q has no value; give it a default (default = ...) or a value when submitting (bsub -var %s=...).", name, name)}
	}
	conv, err := convert.Convert(val, ty)
	if err != nil {
		return cty.DynamicVal, hcl.Diagnostics{errorAt(rng.Ptr(), "Invalid value for variable",
			"The value of variable %q is not valid: %s.", name, err)}
	}
	return conv, nil
}

// decodeLocals evaluates the locals blocks. A local may use var.*, other
// locals and functions; they are evaluated in dependency order, and a
// cycle is an error.
func decodeLocals(blocks []*hcl.Block, ctx *hcl.EvalContext) (map[string]cty.Value, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	pending := map[string]*hcl.Attribute{}
	for _, b := range blocks {
		attrs, d := b.Body.JustAttributes()
		diags = append(diags, d...)
		for name, a := range attrs {
			if first, dup := pending[name]; dup {
				diags = append(diags, errorAt(a.NameRange.Ptr(), "Duplicate local value",
					"Local value %q was already defined at %s; give each local one definition.", name, posString(first.NameRange)))
				continue
			}
			pending[name] = a
		}
	}
	vals := map[string]cty.Value{}
	for len(pending) > 0 {
		progressed := false
		for _, name := range sortedKeys(pending) {
			a := pending[name]
			if slices.ContainsFunc(localRefs(a.Expr), func(dep string) bool { return pending[dep] != nil }) {
				continue // evaluate its dependencies first
			}
			v, d := a.Expr.Value(evalContext(ctxVars(ctx), vals))
			diags = append(diags, d...)
			if d.HasErrors() {
				v = cty.DynamicVal
			}
			vals[name] = v
			delete(pending, name)
			progressed = true
		}
		if !progressed {
			for _, name := range sortedKeys(pending) {
				a := pending[name]
				diags = append(diags, errorAt(a.Expr.Range().Ptr(), "Circular local value",
					"Local value %q depends on itself through %s; break the cycle.", name,
					strings.Join(prefixAll("local.", localRefs(a.Expr)), ", ")))
				vals[name] = cty.DynamicVal
			}
			break
		}
	}
	return vals, diags
}

// localRefs names the locals an expression refers to.
func localRefs(expr hcl.Expression) []string {
	var names []string
	for _, t := range expr.Variables() {
		if t.RootName() != "local" || len(t) < 2 {
			continue
		}
		if a, ok := t[1].(hcl.TraverseAttr); ok && !slices.Contains(names, a.Name) {
			names = append(names, a.Name)
		}
	}
	return names
}

// ctxVars is the var object of ctx.
func ctxVars(ctx *hcl.EvalContext) map[string]cty.Value {
	v := ctx.Variables["var"]
	if v.IsNull() || !v.IsKnown() || v.LengthInt() == 0 {
		return nil
	}
	return v.AsValueMap()
}

// posString writes a range's start as "file:line:col".
func posString(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func prefixAll(prefix string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = prefix + s
	}
	return out
}
