package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// TestDevFakeGPUs (issue 14 item 6i): schedd --dev --fake-gpus N gives
// every dev nodelet N fake GPUs; the flag needs --dev and a count.
func TestDevFakeGPUs(t *testing.T) {
	o, err := parseFlags([]string{"--dev", "--data-dir", t.TempDir(), "--nodes", "2", "--fake-gpus", "4"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	args := nodeletArgs(o, "unix:///x.sock", "node2", "127.0.0.1", "/s", false)
	if i := slices.Index(args, "--fake-gpus"); i < 0 || i+1 >= len(args) || args[i+1] != "4" {
		t.Fatalf("nodelet args %q: want --fake-gpus 4", args)
	}
	o.fakeGPUs = 0
	if args := nodeletArgs(o, "unix:///x.sock", "node2", "127.0.0.1", "/s", false); slices.Contains(args, "--fake-gpus") {
		t.Fatalf("without --fake-gpus, nodelet args %q name it", args)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--fake-gpus", "2"}, "--fake-gpus goes with --dev"},
		{[]string{"--dev-run-dir", "/r"}, "--dev-run-dir goes with --dev"},
		{[]string{"--dev", "--fake-gpus", "-1"}, "--fake-gpus must be 0 or more"},
	} {
		if _, err := parseFlags(tt.args, io.Discard); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %q", tt.args, err, tt.want)
		}
	}
}

// TestDevRunDir: schedd --dev --dev-run-dir DIR gives each dev nodelet
// the run directory DIR/NAME; without it, the nodelet's default.
func TestDevRunDir(t *testing.T) {
	o, err := parseFlags([]string{"--dev", "--data-dir", t.TempDir(), "--dev-run-dir", "/run/dev"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	args := nodeletArgs(o, "unix:///x.sock", "node2", "127.0.0.1", "/s", false)
	if i := slices.Index(args, "--run-dir"); i < 0 || i+1 >= len(args) || args[i+1] != "/run/dev/node2" {
		t.Fatalf("nodelet args %q: want --run-dir /run/dev/node2", args)
	}
	o.runDir = ""
	if args := nodeletArgs(o, "unix:///x.sock", "node2", "127.0.0.1", "/s", false); slices.Contains(args, "--run-dir") {
		t.Fatalf("without --dev-run-dir, nodelet args %q name --run-dir", args)
	}
}
