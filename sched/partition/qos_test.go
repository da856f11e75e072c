package partition

import (
	"strings"
	"testing"
	"time"
)

const qosFile = `
preempt_window = "5m"
partition "batch" {
  nodes = ["*"]
  preempt_mode = "requeue"
  grace_time = "30s"
  preempt_exempt_time = "2m"
  default_qos = "low"
}
partition "urgent" {
  nodes = ["*"]
  priority_tier = 10
}
account "lab" {
  users = ["alice"]
  default_qos = "high"
}
qos "high" {
  priority = 100
  preempt = ["low"]
  max_wall = "4h"
  max_jobs_per_user = 2
  max_cpu_per_user = 64
  max_gpu_per_user = 8
}
qos "low" {
  priority = 1
  preempt_mode = "cancel"
  usage_factor = 0.25
}
`

func TestQOSParse(t *testing.T) {
	c, diags := Parse("p.hcl", []byte(qosFile))
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	b := c.Partition("batch")
	if b.PreemptMode != PreemptRequeue || b.GraceTime != 30*time.Second || b.PreemptExemptTime != 2*time.Minute || b.DefaultQOS != "low" {
		t.Fatalf("batch %+v", b)
	}
	if c.Window() != 5*time.Minute {
		t.Errorf("window %v; want 5m", c.Window())
	}
	h := c.QOSByName("high")
	if h == nil || h.Priority != 100 || h.Preempt[0] != "low" || h.MaxWall != 4*time.Hour || h.MaxJobsPerUser != 2 ||
		h.MaxCPUPerUser != 64 || h.MaxGPUPerUser != 8 || h.Factor() != 1 {
		t.Fatalf("high %+v", h)
	}
	if l := c.QOSByName("low"); l.Factor() != 0.25 || c.PreemptModeOf(b, "low") != PreemptCancel || c.PreemptModeOf(b, "high") != PreemptRequeue {
		t.Fatalf("low %+v", l)
	}
	for _, tt := range []struct{ part, account, asked, want, err string }{
		{"batch", "lab", "", "low", ""},   // the partition's default first
		{"urgent", "lab", "", "high", ""}, // then the account's
		{"urgent", "", "", "", ""},
		{"batch", "lab", "high", "high", ""},
		{"batch", "lab", "gold", "", `qos "gold" is not defined in the partitions file; known QOSes: high, low`},
	} {
		got, err := c.ResolveQOS(c.Partition(tt.part), tt.account, tt.asked)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && err.Error() != tt.err) {
			t.Errorf("ResolveQOS(%s, %s, %q) = %q, %v; want %q, %s", tt.part, tt.account, tt.asked, got, err, tt.want, tt.err)
		}
	}
}

func TestQOSParseErrors(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{`partition "a" {
  preempt_mode = "pause"
  nodes = ["*"]
}`, `p.hcl:2:18: Invalid preempt_mode; preempt_mode "pause" is not known`},
		{`partition "a" {
  default_qos = "gold"
  nodes = ["*"]
}`, `p.hcl:2:17: Unknown qos; default_qos "gold" is not a qos of this file`},
		{`partition "a" { nodes = ["*"] }
qos "x" { preempt = ["y"] }`, `p.hcl:2:22: Unknown qos; qos "y" is not defined in this file`},
		{`partition "a" { nodes = ["*"] }
qos "x" { preempt = ["y"] }
qos "y" {}`, `p.hcl:2:22: QOS preempts its equal; qos "x" lists "y" in preempt, but its priority 0 is not above "y"'s 0`},
		{`partition "a" { nodes = ["*"] }
qos "x" { usage_factor = -1 }`, `Invalid usage_factor`},
	} {
		_, diags := Parse("p.hcl", []byte(tt.src))
		if got := FormatDiagnostics(diags); !strings.Contains(got, tt.want) {
			t.Errorf("%s:\n got %s\nwant %s", tt.src, got, tt.want)
		}
	}
}

// TestPreemptDepth: preempt_depth bounds the jobs that choose victims in
// a pass: 100 unless the file says, 0 no bound, a negative one refused
// where it is written.
func TestPreemptDepth(t *testing.T) {
	for _, tt := range []struct {
		src  string
		want int
		err  string
	}{
		{``, DefaultPreemptDepth, ""},
		{`preempt_depth = 8`, 8, ""},
		{`preempt_depth = 0`, 0, ""},
		{`preempt_depth = -1`, 0, "p.hcl:1:17: Invalid preempt_depth"},
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
		if got := c.Depth(); got != tt.want {
			t.Errorf("%q: depth %d, want %d", tt.src, got, tt.want)
		}
	}
}
