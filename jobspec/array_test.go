package jobspec_test

import (
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/jobspec"
)

func TestParseIndices(t *testing.T) {
	tests := []struct {
		in       string
		canon    string
		count    int
		throttle int
		at       map[int]int // position → index
	}{
		{"1-100", "1-100", 100, 0, map[int]int{0: 1, 99: 100, 100: -1}},
		{"[1-100%10]", "1-100", 100, 10, nil},
		{"1-100:2%10", "1-99:2", 50, 10, map[int]int{0: 1, 1: 3, 49: 99}},
		{"1,3,5-9:2", "1,3,5-9:2", 5, 0, map[int]int{0: 1, 1: 3, 2: 5, 3: 7, 4: 9}},
		{"0", "0", 1, 0, map[int]int{0: 0}},
		{"0-15:4", "0-12:4", 4, 0, map[int]int{3: 12}},
		{"1-100000", "1-100000", 100000, 0, map[int]int{99999: 100000}},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			x, th, err := jobspec.ParseIndices(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if x.String() != tc.canon || x.Count() != tc.count || th != tc.throttle {
				t.Fatalf("got %s (%d elements, throttle %d), want %s (%d, %d)", x, x.Count(), th, tc.canon, tc.count, tc.throttle)
			}
			for pos, idx := range tc.at {
				if got := x.At(pos); got != idx {
					t.Errorf("At(%d) = %d, want %d", pos, got, idx)
				}
				if idx >= 0 && x.Position(idx) != pos {
					t.Errorf("Position(%d) = %d, want %d", idx, x.Position(idx), pos)
				}
			}
		})
	}
	for _, bad := range []string{"", "[1-3", "5-1", "1-10:0", "3:2", "1-5,4-8", "1,1", "a-b", "-1", "1-10%0", "1-2000000", "1-10%x"} {
		if _, _, err := jobspec.ParseIndices(bad); err == nil {
			t.Errorf("ParseIndices(%q) took it", bad)
		}
	}
}

func TestSplitArrayName(t *testing.T) {
	base, rng, ok := jobspec.SplitArrayName("sweep[1-100%10]")
	if !ok || base != "sweep" || rng != "1-100%10" {
		t.Fatalf("got %q %q %v", base, rng, ok)
	}
	// bsub(1) writes the throttle after the brackets: -J "sweep[1-100]%10".
	base, rng, ok = jobspec.SplitArrayName("sweep[1-100]%10")
	if !ok || base != "sweep" || rng != "1-100%10" {
		t.Fatalf("throttle after the brackets: got %q %q %v", base, rng, ok)
	}
	base, rng, ok = jobspec.SplitArrayName("job[1,3,5-9:2]%2")
	if !ok || base != "job" || rng != "1,3,5-9:2%2" {
		t.Fatalf("list with a throttle after: got %q %q %v", base, rng, ok)
	}
	if _, err := jobspec.ArrayFromSpec("1-100%10%5"); err == nil {
		t.Fatal("two throttles (sweep[1-100%10]%5) accepted")
	}
	if _, _, ok := jobspec.SplitArrayName("plain"); ok {
		t.Fatal("a plain name is not an array")
	}
}

func TestParseArrayBlock(t *testing.T) {
	src := `job "sweep" {
  image   = "host"
  command = ["true"]
  output  = "out.%I"
  array {
    range       = "1-100"
    max_running = 10
  }
}
`
	j, diags := jobspec.Parse("sweep.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(jobspec.FormatDiagnostics(diags))
	}
	if j.Array == nil || j.Array.Range != "1-100" || j.Array.MaxRunning != 10 {
		t.Fatalf("array = %+v", j.Array)
	}
}

func TestParseArrayErrors(t *testing.T) {
	tests := []struct {
		name, block, want string
	}{
		{"bad range", `array { range = "9-1" }`, `sweep.hcl:4:19: Invalid array range`},
		{"throttle in range", `array { range = "1-9%2" }`, `write it as max_running = 2`},
		{"negative max_running", `array {
    range = "1-9"
    max_running = -1
  }`, `sweep.hcl:6:19: Invalid max_running`},
		{"missing range", `array { max_running = 2 }`, `Missing required argument`},
		{"two blocks", `array { range = "1" }
  array { range = "2" }`, `Duplicate array block`},
		{"bad pattern", `output = "out.%Q"`, `%I or %a (array index)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "job \"sweep\" {\n  image   = \"host\"\n  command = [\"true\"]\n  " + tc.block + "\n}\n"
			_, diags := jobspec.Parse("sweep.hcl", []byte(src))
			if !diags.HasErrors() {
				t.Fatal("parsed without error")
			}
			if got := jobspec.FormatDiagnostics(diags); !strings.Contains(got, tc.want) {
				t.Fatalf("diagnostics lack %q:\n%s", tc.want, got)
			}
		})
	}
}

// FuzzParseIndices: ParseIndices never panics; what it accepts counts at
// most MaxArraySize elements, At and Position are inverses on it, and
// its String parses back to the same indices.
func FuzzParseIndices(f *testing.F) {
	for _, s := range []string{"1-100", "[1-100%10]", "1,3,5-9:2", "0-15:4%2", "5-1", "1,1", "1-2000000", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		x, _, err := jobspec.ParseIndices(s)
		if err != nil {
			return
		}
		n := x.Count()
		if n < 1 || n > jobspec.MaxArraySize {
			t.Fatalf("%q: %d elements", s, n)
		}
		for _, pos := range []int{0, n / 2, n - 1} {
			if idx := x.At(pos); idx < 0 || x.Position(idx) != pos {
				t.Fatalf("%q: At(%d) = %d, Position of it %d", s, pos, idx, x.Position(idx))
			}
		}
		y, _, err := jobspec.ParseIndices(x.String())
		if err != nil || y.String() != x.String() {
			t.Fatalf("%q: String %q parses to %v, %v", s, x.String(), y, err)
		}
	})
}
