package jobspec

import (
	"maps"
	"math/big"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/troupe-hpc/troupe/internal/hclattr"
)

// MaxLicenseCount bounds what one job may ask of one license: far above
// any site's count, low enough that no sum overflows.
const MaxLicenseCount = 1 << 20

// licenses decodes licenses = { matlab = 2, ansys = 1 }: each value a
// whole number, each key's range kept for Validate and admission
// ("licenses.matlab").
func (d *decoder) licenses(attrs hclattr.Attrs, j *Job) {
	v, a, ok := attrs.Value("licenses", cty.Map(cty.Number))
	if !ok {
		return
	}
	// Point at each key where the map is written out.
	if pairs, diags := hcl.ExprMap(a.Expr); !diags.HasErrors() {
		for _, p := range pairs {
			if k, diags := p.Key.Value(d.Ctx); !diags.HasErrors() && k.Type() == cty.String && k.IsKnown() && !k.IsNull() {
				d.Ranges["licenses."+k.AsString()] = p.Key.Range()
			}
		}
	}
	j.Licenses = map[string]int{}
	for name, n := range v.AsValueMap() {
		rng := d.Ranges["licenses."+name]
		if rng.Filename == "" {
			rng = a.Expr.Range()
		}
		if n.IsNull() {
			d.Fail("licenses."+name, errorAt(&rng, "Invalid license count", "licenses.%s is null; give a whole number of at least 1.", name))
			continue
		}
		bf := n.AsBigFloat()
		i, acc := bf.Int64()
		if !bf.IsInt() || acc != big.Exact || i != int64(int32(i)) {
			d.Fail("licenses."+name, errorAt(&rng, "Invalid license count", "licenses.%s = %s is not valid; a license count is a whole number of at least 1.", name, bf.Text('g', -1)))
			continue
		}
		j.Licenses[name] = int(i)
	}
}

// licenses checks the license request: valid names (as partitions.hcl
// writes them), counts of at least 1. Whether the site has them is
// schedd's to say, at submit.
func (v *validator) licenses() {
	for _, name := range slices.Sorted(maps.Keys(v.j.Licenses)) {
		n := v.j.Licenses[name]
		path := "licenses." + name
		switch {
		case !partRule.ok(name):
			v.errorf(path, "Invalid license name", "License name %q is not valid; a name starts with a letter and holds letters, digits, '_' and '-'.", name)
		case n < 1 || n > MaxLicenseCount:
			v.errorf(path, "Invalid license count", "licenses.%s = %d is not valid; ask for at least 1 (and at most %d).", name, n, MaxLicenseCount)
		}
	}
}
