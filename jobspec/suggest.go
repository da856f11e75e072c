package jobspec

import (
	"fmt"
	"regexp"
	"sync"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/hcl/v2"
)

// bodyContent is body.Content(schema) with hcl's "Did you mean" hints
// mended: hcl offers the first name within two edits in schema order, so
// "gpus" got "cpu"; this offers the nearest one ("gpu").
func bodyContent(body hcl.Body, schema *hcl.BodySchema) (*hcl.BodyContent, hcl.Diagnostics) {
	c, diags := body.Content(schema)
	for _, d := range diags {
		m := unsupported().FindStringSubmatch(d.Detail)
		if m == nil {
			continue
		}
		var names []string
		if m[1] == "An argument named" {
			for _, a := range schema.Attributes {
				names = append(names, a.Name)
			}
		} else {
			for _, b := range schema.Blocks {
				names = append(names, b.Type)
			}
		}
		d.Detail = m[1] + fmt.Sprintf(" %q ", m[2]) + m[3] + " not expected here."
		if s := nearest(m[2], names); s != "" {
			d.Detail += fmt.Sprintf(" Did you mean %q?", s)
		}
	}
	return c, diags
}

// unsupported matches hcl's detail for an unknown argument or block.
// It is compiled on first use: most files have no such error.
var unsupported = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(An argument named|Blocks of type) "([^"]*)" (is|are) not expected here\.`)
})

// nearest is the name fewest edits from given, at most two away (hcl's
// threshold); on a tie the earlier name; "" when none is that close.
func nearest(given string, names []string) string {
	best, bestDist := "", 3
	for _, n := range names {
		if d := levenshtein.Distance(given, n, nil); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}
