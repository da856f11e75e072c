package fairshare

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestCompute(t *testing.T) {
	tr := New([]Node{
		{Name: "phys", Shares: 1},
		{Name: "bio", Shares: 1},
		{Name: "phys/ann", Parent: "phys", Shares: 1, User: "ann"},
		{Name: "phys/bob", Parent: "phys", Shares: 1, User: "bob"},
		{Name: "bio/cy", Parent: "bio", Shares: 1, User: "cy"},
	})
	tr.SetUsage("phys/ann", 60)
	tr.SetUsage("phys/bob", 15)
	tr.SetUsage("bio/cy", 25)
	rows, f := tr.Compute()
	want := []struct {
		name          string
		s, un, ue, fs float64
	}{
		// bio: S=0.5, Un=Ue=0.25, F=2^(-0.5)
		{"bio", 0.5, 0.25, 0.25, math.Exp2(-0.5)},
		// cy is bio's only user: S=0.5, Ue = 0.25 + (0.25-0.25)*1
		{"bio/cy", 0.5, 0.25, 0.25, math.Exp2(-0.5)},
		{"phys", 0.5, 0.75, 0.75, math.Exp2(-1.5)},
		// ann: S=0.25, Un=0.6, Ue = 0.6 + (0.75-0.6)*0.5 = 0.675
		{"phys/ann", 0.25, 0.6, 0.675, math.Exp2(-0.675 / 0.25)},
		// bob: Un=0.15, Ue = 0.15 + (0.75-0.15)*0.5 = 0.45
		{"phys/bob", 0.25, 0.15, 0.45, math.Exp2(-0.45 / 0.25)},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, w := range want {
		r := rows[i]
		name := r.Account
		if r.User != "" {
			name = r.Account + "/" + r.User
		}
		if name != w.name || !near(r.NormShares, w.s) || !near(r.NormUsage, w.un) || !near(r.EffUsage, w.ue) || !near(r.FairShare, w.fs) || !near(f[w.name], w.fs) {
			t.Errorf("row %d = %+v, want %+v", i, r, w)
		}
	}
}

func TestNoUsageIsFull(t *testing.T) {
	_, f := New([]Node{{Name: "a", Shares: 1}, {Name: "b", Shares: 0}}).Compute()
	if f["a"] != 1 || f["b"] != 0 {
		t.Fatalf("factors %v, want a=1 (no usage) and b=0 (no shares)", f)
	}
}

func TestUsageDecay(t *testing.T) {
	t0 := time.Unix(0, 0)
	u := Usage{}.Add(t0, 100, time.Hour)
	if v := u.To(t0.Add(time.Hour), time.Hour).Value; !near(v, 50) {
		t.Fatalf("after one half-life: %g, want 50", v)
	}
	if v := u.To(t0.Add(3*time.Hour), time.Hour).Value; !near(v, 12.5) {
		t.Fatalf("after three half-lives: %g, want 12.5", v)
	}
}

// TestFactorProperties against the plain statement for a flat tree:
// F = 2^(−(u/Σu)/(s/Σs)), in [0, 1], lower for more usage at equal shares.
func TestFactorProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 8).Draw(t, "users")
		var nodes []Node
		shares := make([]float64, n)
		usage := make([]float64, n)
		var ss, us float64
		for i := 0; i < n; i++ {
			shares[i] = float64(rapid.IntRange(1, 10).Draw(t, "shares"))
			usage[i] = float64(rapid.IntRange(0, 1000).Draw(t, "usage"))
			ss += shares[i]
			us += usage[i]
			nodes = append(nodes, Node{Name: string(rune('a' + i)), Shares: shares[i], User: string(rune('a' + i))})
		}
		tr := New(nodes)
		for i := 0; i < n; i++ {
			tr.SetUsage(string(rune('a'+i)), usage[i])
		}
		_, f := tr.Compute()
		for i := 0; i < n; i++ {
			un := 0.0
			if us > 0 {
				un = usage[i] / us
			}
			want := math.Exp2(-un / (shares[i] / ss))
			got := f[string(rune('a'+i))]
			if !near(got, want) || got < 0 || got > 1 {
				t.Fatalf("user %d: F = %g, want %g", i, got, want)
			}
		}
	})
}
