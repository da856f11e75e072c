package nodesim

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestNamesSortAndMatchRanges: names are zero-padded to the width of
// the node count, so that they sort in order and a partitions.hcl range
// (sim[0001-5000]) names them.
func TestNamesSortAndMatchRanges(t *testing.T) {
	for _, c := range []struct {
		i, n int
		want string
	}{{1, 9, "sim1"}, {1, 50, "sim01"}, {50, 50, "sim50"}, {7, 10000, "sim00007"}, {10000, 10000, "sim10000"}} {
		if got := Name("sim", c.i, c.n); got != c.want {
			t.Errorf("Name(sim, %d, %d) = %q, want %q", c.i, c.n, got, c.want)
		}
	}
}

// TestBehaviour: how long a pretend container runs and how it exits
// come from the job's env, else its walltime, else the default; a bad
// value is refused naming the variable.
func TestBehaviour(t *testing.T) {
	job := func(walltime time.Duration, env map[string]string) api.AssignedJob {
		return api.AssignedJob{Walltime: walltime, Spec: api.JobSpec{Env: env}}
	}
	for _, c := range []struct {
		name    string
		job     api.AssignedJob
		run     time.Duration
		code    int
		errName string
	}{
		{"default", job(0, nil), 7 * time.Second, 0, ""},
		{"walltime", job(time.Minute, nil), time.Minute, 0, ""},
		{"env over walltime", job(time.Minute, map[string]string{EnvDuration: "150ms", EnvExit: "3"}), 150 * time.Millisecond, 3, ""},
		{"zero", job(0, map[string]string{EnvDuration: "0s"}), 0, 0, ""},
		{"bad duration", job(0, map[string]string{EnvDuration: "soon"}), 0, 0, EnvDuration},
		{"negative duration", job(0, map[string]string{EnvDuration: "-1s"}), 0, 0, EnvDuration},
		{"bad exit", job(0, map[string]string{EnvExit: "256"}), 0, 0, EnvExit},
		{"word exit", job(0, map[string]string{EnvExit: "fail"}), 0, 0, EnvExit},
	} {
		run, code, err := behaviour(c.job, 7*time.Second)
		switch {
		case c.errName != "" && (err == nil || !strings.Contains(err.Error(), c.errName)):
			t.Errorf("%s: error %v, want one naming %s", c.name, err, c.errName)
		case c.errName == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.errName == "" && (run != c.run || code != c.code):
			t.Errorf("%s: runs %s exiting %d, want %s exiting %d", c.name, run, code, c.run, c.code)
		}
	}
}

// TestConfigRefused: a configuration that cannot describe a node is
// refused with what is wrong.
func TestConfigRefused(t *testing.T) {
	ok := Config{Addr: "unix:///nonexistent", Nodes: 1, CPU: 1, Memory: 1 << 30}
	if _, err := ok.withDefaults(); err != nil {
		t.Fatalf("a valid config refused: %v", err)
	}
	for _, c := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Addr = "" }, "address"},
		{func(c *Config) { c.Nodes = 0 }, "nodes"},
		{func(c *Config) { c.CPU = 0 }, "cpu"},
		{func(c *Config) { c.Memory = 0 }, "memory"},
		{func(c *Config) { c.GPUs = -1 }, "gpus"},
		{func(c *Config) { c.Duration = -time.Second }, "duration"},
	} {
		cfg := ok
		c.change(&cfg)
		if _, err := cfg.withDefaults(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config %+v: error %v, want one naming %s", cfg, err, c.want)
		}
	}
}

// TestFirstOutput: with Config.FirstOutput a container's start writes
// the wall clock as its output file's line, where the job's pattern
// puts it, relative to its working directory.
func TestFirstOutput(t *testing.T) {
	cwd := t.TempDir()
	job := api.AssignedJob{ID: 7, Cwd: cwd, Spec: api.JobSpec{Output: "out-%j.%h"}}
	at := time.Date(2026, 11, 29, 6, 0, 0, 123456789, time.UTC)
	if err := firstOutput(job, "sub2", at); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(cwd, "out-7.sub2"))
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.FormatInt(at.Unix(), 10) + ".123456\n"; string(raw) != want {
		t.Errorf("first output %q, want %q", raw, want)
	}
}
