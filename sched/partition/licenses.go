package partition

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/troupe-hpc/troupe/internal/hclattr"
)

// License is a site-wide count of something jobs hold while they run: the
// seats of a licensed solver (license "matlab" { count = 20 }), shared by
// every partition. A job asks for some (licenses = { matlab = 2 } in its
// file, sbatch -L matlab:2, bsub -R "rusage[matlab=2]"); the scheduler
// never lets the jobs that run hold more than Count together.
type License struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

var licenseSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "count", Required: true}}}

// License returns the license named name, or nil.
func (c *Config) License(name string) *License {
	for i := range c.Licenses {
		if c.Licenses[i].Name == name {
			return &c.Licenses[i]
		}
	}
	return nil
}

// LicenseNames lists the licenses in file order.
func (c *Config) LicenseNames() []string {
	out := make([]string, len(c.Licenses))
	for i, l := range c.Licenses {
		out[i] = l.Name
	}
	return out
}

// LicenseCounts maps each license to its count (nil when there are none).
func (c *Config) LicenseCounts() map[string]int {
	if len(c.Licenses) == 0 {
		return nil
	}
	out := make(map[string]int, len(c.Licenses))
	for _, l := range c.Licenses {
		out[l.Name] = l.Count
	}
	return out
}

// licenses reads the file's license blocks: unique valid names, each
// with a count of at least 1.
func (d *decoder) licenses(blocks hcl.Blocks) []License {
	var out []License
	where := map[string]hcl.Range{}
	for _, b := range blocks {
		if b.Type != "license" {
			continue
		}
		l := License{Name: b.Labels[0]}
		ok := true
		if !nameRe(l.Name) {
			d.Errorf(b.LabelRanges[0], "Invalid license name", "License name %q is not valid; a name starts with a letter and holds letters, digits, '_' and '-'.", l.Name)
			ok = false
		}
		if first, dup := where[l.Name]; dup {
			d.Errorf(b.LabelRanges[0], "Duplicate license", "License %q was already defined at %s; give each license one block.", l.Name, hclattr.Pos(first))
			ok = false
		} else {
			where[l.Name] = b.LabelRanges[0]
		}
		_, attrs := d.attrs(b.Body, licenseSchema)
		if a, got := attrs.Whole("count", &l.Count); got && l.Count < 1 {
			d.Errorf(a.Expr.Range(), "Invalid license count", "count %d is not valid; a license has at least 1 seat (leave the license out to have none).", l.Count)
			ok = false
		} else if !got {
			ok = false
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}
