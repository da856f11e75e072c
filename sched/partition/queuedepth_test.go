package partition

import (
	"strings"
	"testing"
)

// TestQueueDepth: queue_depth bounds the jobs of a partition one pass
// tries: 1000 unless the file says, 0 no bound, a negative one refused
// where it is written.
func TestQueueDepth(t *testing.T) {
	for _, tt := range []struct {
		src  string
		want int
		err  string
	}{
		{``, DefaultQueueDepth, ""},
		{`queue_depth = 50`, 50, ""},
		{`queue_depth = 0`, 0, ""},
		{`queue_depth = -1`, 0, "p.hcl:1:15: Invalid queue_depth"},
	} {
		c, diags := Parse("p.hcl", []byte(tt.src+"\npartition \"batch\" { nodes = [\"*\"] }\n"))
		if tt.err != "" {
			if got := FormatDiagnostics(diags); !strings.Contains(got, tt.err) {
				t.Errorf("%q: %q, want %q", tt.src, got, tt.err)
			}
			continue
		}
		if diags.HasErrors() {
			t.Fatalf("%q: %s", tt.src, FormatDiagnostics(diags))
		}
		if got := c.Queue(); got != tt.want {
			t.Errorf("%q: queue depth %d, want %d", tt.src, got, tt.want)
		}
	}
}
