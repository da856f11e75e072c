// Package hclattr reads the typed attributes of HCL blocks for the
// decoders of job files (jobspec), partitions files (sched/partition),
// nodelet.hcl (nodelet) and the image catalog (internal/catalog): strings, booleans, numbers, whole numbers and lists
// of strings, each problem an error diagnostic at the value's
// file:line:col; and, when asked, the range of every value read and the
// paths of those found broken, so that the checks that run after
// decoding (jobspec.Validate) point into the file too.
//
// gohcl decodes a body into a struct in one go, and that loses what
// these files need: the range of each value by path (a later check's
// file:line:col), values of more than one type (memory = "16G" or a
// number of bytes; "off" or a duration), whether an attribute was given
// at all (a role's replicas), and the messages the files' tests pin
// (a whole number, a null element). So the decoders keep their schemas
// and domain rules, and read each attribute through this package. It
// also keeps gohcl out of the binaries: gohcl imports hclwrite, which
// links go-cmp, whose package initialisers every start of the nodelet
// (each container's init among them) would pay for.
//
// It owns no schema and no rule of its own, and imports only hcl and
// cty: never a troupe package.
package hclattr

import (
	"fmt"
	"math/big"
	"strconv"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Decoder collects the diagnostics of one file's decoding.
type Decoder struct {
	// Ctx holds the variables and functions expressions may use; nil:
	// none (literal values only).
	Ctx   *hcl.EvalContext
	Diags hcl.Diagnostics
	// Ranges, when not nil, records the range of every value read, by
	// path (Attrs.Path), and of each element of a list of strings
	// (path.0, path.1, …).
	Ranges map[string]hcl.Range
	// Failed, when not nil, records the paths of values reported
	// broken, so that later checks of the same value stay quiet.
	Failed map[string]bool
}

// Errorf reports an error at rng.
func (d *Decoder) Errorf(rng hcl.Range, summary, detail string, args ...any) {
	d.Diags = append(d.Diags, &hcl.Diagnostic{
		Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(detail, args...), Subject: rng.Ptr(),
	})
}

// Fail reports diag about the value at path, and records path failed.
func (d *Decoder) Fail(path string, diag *hcl.Diagnostic) {
	d.Diags = append(d.Diags, diag)
	if d.Failed != nil {
		d.Failed[path] = true
	}
}

// Content is body.Content(schema), its diagnostics collected.
func (d *Decoder) Content(body hcl.Body, schema *hcl.BodySchema) *hcl.BodyContent {
	c, diags := body.Content(schema)
	d.Diags = append(d.Diags, diags...)
	return c
}

// Attrs are the attributes of one block, read through d. prefix is the
// block's path ("" the file's top level): attribute cpu of a block at
// "resources" has path "resources.cpu".
func (d *Decoder) Attrs(attrs hcl.Attributes, prefix string) Attrs {
	return Attrs{d: d, attrs: attrs, prefix: prefix}
}

// Attrs reads the attributes of one block; see Decoder.Attrs.
type Attrs struct {
	d      *Decoder
	attrs  hcl.Attributes
	prefix string
}

// Path is the path of attribute name.
func (as Attrs) Path(name string) string {
	if as.prefix == "" {
		return name
	}
	return as.prefix + "." + name
}

// Get is attribute name, nil when the block leaves it out.
func (as Attrs) Get(name string) *hcl.Attribute { return as.attrs[name] }

// Value evaluates attribute name as type ty (cty.DynamicPseudoType: as
// written). ok is false when the attribute is absent or null (both mean
// "not set"), when evaluating or converting it failed (reported), or
// when its value depends on an earlier error; a is nil only when it is
// absent.
func (as Attrs) Value(name string, ty cty.Type) (v cty.Value, a *hcl.Attribute, ok bool) {
	d, path := as.d, as.Path(name)
	a = as.attrs[name]
	if a == nil {
		return cty.NilVal, nil, false
	}
	if d.Ranges != nil {
		d.Ranges[path] = a.Expr.Range()
	}
	v, diags := a.Expr.Value(d.Ctx)
	d.Diags = append(d.Diags, diags...)
	if diags.HasErrors() || !v.IsWhollyKnown() {
		if d.Failed != nil {
			d.Failed[path] = true
		}
		return cty.NilVal, a, false
	}
	if v.IsNull() {
		return cty.NilVal, a, false
	}
	v, err := convert.Convert(v, ty)
	if err != nil {
		d.Fail(path, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Incorrect attribute value type",
			Detail:   fmt.Sprintf("Inappropriate value for attribute %q: %s.", name, err),
			Subject:  a.Expr.Range().Ptr(),
			Context:  a.Range.Ptr(),
		})
		return cty.NilVal, a, false
	}
	return v, a, true
}

// String reads a string into dst.
func (as Attrs) String(name string, dst *string) (*hcl.Attribute, bool) {
	v, a, ok := as.Value(name, cty.String)
	if ok {
		*dst = v.AsString()
	}
	return a, ok
}

// Bool reads a boolean into dst.
func (as Attrs) Bool(name string, dst *bool) (*hcl.Attribute, bool) {
	v, a, ok := as.Value(name, cty.Bool)
	if ok {
		*dst = v.True()
	}
	return a, ok
}

// Number reads a number into dst.
func (as Attrs) Number(name string, dst *float64) (*hcl.Attribute, bool) {
	v, a, ok := as.Value(name, cty.Number)
	if ok {
		*dst, _ = v.AsBigFloat().Float64()
	}
	return a, ok
}

// Whole reads a whole number that fits an int32 into dst.
func (as Attrs) Whole(name string, dst *int) (*hcl.Attribute, bool) {
	v, a, ok := as.Value(name, cty.Number)
	if !ok {
		return a, false
	}
	bf := v.AsBigFloat()
	i, acc := bf.Int64()
	if !bf.IsInt() || acc != big.Exact || i != int64(int32(i)) {
		as.d.Fail(as.Path(name), &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + name,
			Detail:  fmt.Sprintf("%s %s is not valid; it must be a whole number.", name, bf.Text('g', -1)),
			Subject: a.Expr.Range().Ptr()})
		return a, false
	}
	*dst = int(i)
	return a, true
}

// Strings reads a list of strings into dst; a null element is an error.
func (as Attrs) Strings(name string, dst *[]string) (*hcl.Attribute, bool) {
	v, a, ok := as.Value(name, cty.List(cty.String))
	if !ok {
		return a, false
	}
	out := make([]string, 0, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() {
			as.d.Fail(as.Path(name), &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + name,
				Detail:  fmt.Sprintf("%s holds a null element; every element must be a string.", name),
				Subject: a.Expr.Range().Ptr()})
			return a, false
		}
		out = append(out, e.AsString())
	}
	if as.d.Ranges != nil {
		if elems, diags := hcl.ExprList(a.Expr); !diags.HasErrors() && len(elems) == len(out) {
			for i, e := range elems {
				as.d.Ranges[as.Path(name)+"."+strconv.Itoa(i)] = e.Range()
			}
		}
	}
	*dst = out
	return a, true
}

// ElemRange is the range of element i of list attribute a where the
// list is written out, else the range of a's value.
func ElemRange(a *hcl.Attribute, i int) hcl.Range {
	if elems, diags := hcl.ExprList(a.Expr); !diags.HasErrors() && i < len(elems) {
		return elems[i].Range()
	}
	return a.Expr.Range()
}

// Pos is rng's start as file:line:col.
func Pos(rng hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", rng.Filename, rng.Start.Line, rng.Start.Column)
}
