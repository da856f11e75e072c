package nodelet

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestIsLocal(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"unix:///run/troupe/schedd.sock", true},
		{"/run/troupe/schedd.sock", true},
		{"127.0.0.1:4646", true},
		{"http://localhost:4646", true},
		{"http://[::1]:4646", true},
		{"10.0.0.5:4646", false},
		{"https://schedd.example:4646", false},
	}
	for _, tc := range tests {
		if got := isLocal(tc.addr); got != tc.want {
			t.Errorf("isLocal(%q) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func TestWithDefaults(t *testing.T) {
	init := filepath.Join(t.TempDir(), InitName)
	if err := os.WriteFile(init, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := Config{Addr: "127.0.0.1:1", InitBinary: init, FenceBinary: init}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Name == "" || c.CPU <= 0 || c.Memory <= 0 || c.Advertise != "127.0.0.1" ||
		c.StateDir != DefaultStateDir || c.Runtime != RuntimeAuto || c.StopGrace != DefaultStopGrace {
		t.Errorf("defaults not filled: %+v", c)
	}
	if c.SlurmBinary != "" && filepath.Base(c.SlurmBinary) != SlurmName {
		t.Errorf("SlurmBinary %q found by default, want troupe-slurm next to the test binary or none", c.SlurmBinary)
	}
	named, err := Config{Addr: "127.0.0.1:1", InitBinary: init, FenceBinary: init, SlurmBinary: init}.withDefaults()
	if err != nil || named.SlurmBinary != init {
		t.Errorf("SlurmBinary named: %q, %v", named.SlurmBinary, err)
	}
	bad := []Config{
		{InitBinary: init},
		{Addr: "x:1", InitBinary: init, Advertise: "not-an-ip"},
		{Addr: "x:1", InitBinary: filepath.Join(t.TempDir(), "missing")},
		{Addr: "x:1", InitBinary: init, FenceBinary: filepath.Join(t.TempDir(), "missing")},
		{Addr: "x:1", InitBinary: init, FenceBinary: init, Heartbeat: -time.Second},
		// A troupe-slurm named but missing is an error (found by default
		// only when it is there).
		{Addr: "x:1", InitBinary: init, FenceBinary: init, SlurmBinary: filepath.Join(t.TempDir(), "missing")},
	}
	for _, b := range bad {
		if _, err := b.withDefaults(); err == nil {
			t.Errorf("withDefaults(%+v) = nil error", b)
		}
	}
}
