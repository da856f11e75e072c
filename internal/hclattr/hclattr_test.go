package hclattr

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

func attrsOf(t *testing.T, src string) (*Decoder, Attrs) {
	t.Helper()
	f, diags := hclsyntax.ParseConfig([]byte(src), "t.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	attrs, diags := f.Body.JustAttributes()
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	d := &Decoder{Ranges: map[string]hcl.Range{}, Failed: map[string]bool{}}
	return d, d.Attrs(attrs, "res")
}

// TestTypedValues: each reader fills its destination, records the
// value's range under the block's path, and a list's elements each.
func TestTypedValues(t *testing.T) {
	d, as := attrsOf(t, "s = \"x\"\nb = true\nn = 1.5\nw = 7\nl = [\"a\", \"b\"]\nnull_s = null\n")
	var s, unset string
	var b bool
	var n float64
	var w int
	var l []string
	as.String("s", &s)
	as.Bool("b", &b)
	as.Number("n", &n)
	as.Whole("w", &w)
	as.Strings("l", &l)
	if a, ok := as.String("null_s", &unset); a == nil || ok {
		t.Errorf("null: attribute %v ok %v, want given and not set", a, ok)
	}
	if a, ok := as.String("absent", &unset); a != nil || ok {
		t.Errorf("absent: attribute %v ok %v", a, ok)
	}
	if s != "x" || !b || n != 1.5 || w != 7 || strings.Join(l, ",") != "a,b" || unset != "" {
		t.Errorf("got %q %v %v %v %q %q", s, b, n, w, l, unset)
	}
	if d.Diags.HasErrors() {
		t.Fatal(d.Diags)
	}
	for path, want := range map[string]string{"res.s": "t.hcl:1:5", "res.w": "t.hcl:4:5", "res.l.1": "t.hcl:5:11"} {
		if got := Pos(d.Ranges[path]); got != want {
			t.Errorf("range of %s = %s, want %s", path, got, want)
		}
	}
}

// TestProblemsNamePlaceAndPath: a wrong type, a fraction where a whole
// number goes and a null list element are errors at the value, and
// their paths are marked failed.
func TestProblemsNamePlaceAndPath(t *testing.T) {
	d, as := attrsOf(t, "w = 2.5\nb = \"maybe\"\nl = [\"a\", null]\n")
	var w int
	var b bool
	var l []string
	as.Whole("w", &w)
	as.Bool("b", &b)
	as.Strings("l", &l)
	want := []string{
		"t.hcl:1:5: Invalid w; w 2.5 is not valid; it must be a whole number.",
		"t.hcl:2:5: Incorrect attribute value type",
		"t.hcl:3:5: Invalid l; l holds a null element; every element must be a string.",
	}
	if len(d.Diags) != len(want) {
		t.Fatalf("diags = %v, want %d", d.Diags, len(want))
	}
	for i, diag := range d.Diags {
		got := Pos(*diag.Subject) + ": " + diag.Summary + "; " + diag.Detail
		if !strings.HasPrefix(got, want[i]) {
			t.Errorf("diag %d = %q, want %q", i, got, want[i])
		}
	}
	for _, p := range []string{"res.w", "res.b", "res.l"} {
		if !d.Failed[p] {
			t.Errorf("%s not marked failed: %v", p, d.Failed)
		}
	}
}
