package partition

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/partitions/broken/*.err from the current output")

const testdata = "../../testdata/partitions"

func TestExampleFileLoads(t *testing.T) {
	c, diags := ParseFile("../../etc/partitions.hcl")
	if len(diags) > 0 {
		t.Fatalf("etc/partitions.hcl:\n%s", FormatDiagnostics(diags))
	}
	if c.DefaultPartition != "batch" || len(c.Partitions) != 3 || c.Policy != PolicyFairShare || c.HalfLife != 7*24*time.Hour {
		t.Fatalf("loaded %+v", c)
	}
	gpu := c.Partition("gpu")
	if gpu == nil || !gpu.Has("gpu07", nil) || gpu.Has("gpu17", nil) || !gpu.Has("x", []string{"h100"}) || gpu.GPUQuantum != 0.25 {
		t.Fatalf("gpu partition %+v", gpu)
	}
	if !c.Partition("batch").Has("login3", nil) {
		t.Error("glob login* does not match login3")
	}
	if got := c.UserAccounts("alice"); !slices.Equal(got, []string{"vision", "nlp"}) {
		t.Errorf("alice's accounts %v", got)
	}
	if got := c.UserAccounts("carol"); !slices.Equal(got, []string{"general", "nlp"}) {
		t.Errorf("carol's accounts %v (general is her default)", got)
	}
	if !gpu.Allows(c.AccountPath("vision")) || gpu.Allows(c.AccountPath("general")) {
		t.Error("allowed_accounts must admit sub-accounts of research and nothing else")
	}
}

func TestResolveAccount(t *testing.T) {
	c, diags := ParseFile("../../etc/partitions.hcl")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	tests := []struct {
		user, asked, want, err string
	}{
		{"alice", "", "vision", ""},
		{"alice", "nlp", "nlp", ""},
		{"carol", "", "general", ""},
		{"zed", "", "general", ""},
		{"alice", "general", "", `user "alice" is not a member of account "general"; the user's accounts: vision, nlp`},
		{"alice", "nope", "", `account "nope" does not exist`},
	}
	for _, tt := range tests {
		got, err := c.ResolveAccount(tt.user, tt.asked)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("ResolveAccount(%q, %q) = %q, %v; want %q, %q", tt.user, tt.asked, got, err, tt.want, tt.err)
		}
	}
	if a, err := Default().ResolveAccount("x", ""); a != "" || err != nil {
		t.Errorf("no tree: %q %v", a, err)
	}
}

func TestValidFiles(t *testing.T) {
	tests := []struct {
		file  string
		check func(t *testing.T, c *Config)
	}{
		{"minimal.hcl", func(t *testing.T, c *Config) {
			if c.DefaultPartition != "all" || !c.Partition("all").Has("anything", nil) || c.HasTree() || c.ReservationDepth != 1 {
				t.Errorf("%+v", c)
			}
			if c.Weights != DefaultWeights() || c.Billing != DefaultBilling() {
				t.Errorf("defaults: %+v %+v", c.Weights, c.Billing)
			}
		}},
		{"two.hcl", func(t *testing.T, c *Config) {
			cpu := c.Partition("cpu")
			if c.DefaultPartition != "gpu" || cpu.MaxClusterSize != 8 || cpu.Walltime(0) != time.Hour || cpu.Walltime(time.Minute) != time.Minute {
				t.Errorf("%+v", c)
			}
			if !cpu.Has("n4", nil) || cpu.Has("n5", nil) || cpu.Has("n4", []string{"gpu"}) == false {
				t.Error("node matching")
			}
			if cpu.OutputLimit() != 1<<20 || c.Partition("gpu").OutputLimit() != DefaultMaxOutput || DefaultMaxOutput != 10<<30 {
				t.Errorf("max_output: cpu %d, gpu %d; want 1MiB and the default 10GiB", cpu.OutputLimit(), c.Partition("gpu").OutputLimit())
			}
			if cpu.Starvation() != 2*time.Hour || c.Partition("gpu").Starvation() >= 0 || (&Partition{}).Starvation() != DefaultStarvationThreshold {
				t.Errorf("starvation_threshold: cpu %v, gpu %v; want 2h and off (negative)", cpu.Starvation(), c.Partition("gpu").Starvation())
			}
			if c.Account("lab").Shares != 2 || c.Account("other").Shares != 1 {
				t.Error("shares")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c, diags := ParseFile(filepath.Join(testdata, tt.file))
			if len(diags) > 0 {
				t.Fatal(FormatDiagnostics(diags))
			}
			tt.check(t, c)
		})
	}
}

// TestBrokenFiles compares each broken file's diagnostics with its .err
// golden file (go test ./sched/partition -update rewrites them).
func TestBrokenFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testdata, "broken", "*.hcl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no broken files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			name := "broken/" + filepath.Base(f)
			c, diags := Parse(name, src)
			if c != nil || !diags.HasErrors() {
				t.Fatalf("a broken file parsed: %+v", c)
			}
			got := FormatDiagnostics(diags)
			golden := strings.TrimSuffix(f, ".hcl") + ".err"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./sched/partition -update)", err)
			}
			if got != string(want) {
				t.Errorf("diagnostics:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  string
	}{
		{"node1", []string{"node1"}, ""},
		{"gpu[01-03]", []string{"gpu01", "gpu02", "gpu03"}, ""},
		{"n[1-2,5,9-10]", []string{"n1", "n2", "n5", "n9", "n10"}, ""},
		{"r[1-2]n[08-09]", []string{"r1n08", "r1n09", "r2n08", "r2n09"}, ""},
		{"c[8-10]-ib", []string{"c8-ib", "c9-ib", "c10-ib"}, ""},
		{"n[3-1]", nil, "runs backwards"},
		{"n[1-", nil, "[ without ]"},
		{"n1]", nil, "] without ["},
		{"n[]", nil, "empty brackets"},
		{"n[a-b]", nil, "not a number"},
		{"n[0-99999]", nil, "longer than"},
		{"n[0-999][0-999]", nil, "more than 65536"},
		{"bad name", nil, "not a node name"},
	}
	for _, tt := range tests {
		got, err := Expand(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Expand(%q): %v, want error with %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("Expand(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, p := range []string{"../../etc/partitions.hcl", testdata + "/two.hcl", testdata + "/broken/accounts.hcl"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		c, diags := Parse("fuzz.hcl", src)
		if (c == nil) != diags.HasErrors() {
			t.Fatalf("config %v with diagnostics %v", c != nil, diags)
		}
		if c != nil && c.Partition(c.DefaultPartition) == nil {
			t.Fatal("a valid config without its default partition")
		}
	})
}

// TestNetworkEgress: `network { egress = false }` seals a partition's
// sessions (no default network); unset, or true, lets them out; a wrong
// value, an unknown attribute or a second block is refused at its place.
func TestNetworkEgress(t *testing.T) {
	c, diags := Parse("p.hcl", []byte(`
partition "sealed" {
  nodes = ["s*"]
  network {
    egress = false
  }
}
partition "open" {
  nodes   = ["o*"]
  default = true
  network { egress = true }
}
partition "plain" { nodes = ["p*"] }
`))
	if len(diags) > 0 {
		t.Fatal(FormatDiagnostics(diags))
	}
	for name, want := range map[string]bool{"sealed": false, "open": true, "plain": true} {
		if got := c.Partition(name).EgressAllowed(); got != want {
			t.Errorf("partition %s: egress %v, want %v", name, got, want)
		}
	}
	if !c.Partition("nope").EgressAllowed() {
		t.Error("no partition: egress refused")
	}
	for src, want := range map[string]string{
		`partition "a" {
  nodes = ["*"]
  network { egress = "no" }
}`: `p.hcl:3`,
		`partition "a" {
  nodes = ["*"]
  network { nat = false }
}`: `p.hcl:3`,
		`partition "a" {
  nodes = ["*"]
  network { egress = false }
  network { egress = true }
}`: `Duplicate network block`,
	} {
		_, diags := Parse("p.hcl", []byte(src))
		if got := FormatDiagnostics(diags); !strings.Contains(got, want) {
			t.Errorf("%s:\ngot %q, want it to hold %q", src, got, want)
		}
	}
}
