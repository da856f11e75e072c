// Package etc_test loads each example configuration file in etc/ with the
// loader the daemons use, so that the examples stay loadable as they are.
package etc_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/troupe-hpc/troupe/internal/catalog"
	"github.com/troupe-hpc/troupe/nodelet"
	"github.com/troupe-hpc/troupe/sched/config"
	"github.com/troupe-hpc/troupe/sched/partition"
)

// Every file here is covered below.
func TestEveryExampleIsLoaded(t *testing.T) {
	files, err := filepath.Glob("*.hcl")
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{"schedd.hcl": true, "nodelet.hcl": true, "partitions.hcl": true, "images.hcl": true}
	for _, f := range files {
		if !covered[f] {
			t.Errorf("etc/%s is loaded by no test here", f)
		}
	}
	if len(files) != len(covered) {
		t.Errorf("etc/ holds %v", files)
	}
}

// schedd --config etc/schedd.hcl.
func TestScheddHCL(t *testing.T) {
	f, err := config.Load("schedd.hcl")
	if err != nil {
		t.Fatal(err)
	}
	here, _ := filepath.Abs(".")
	for flag, want := range map[string]string{
		"data-dir":   "/var/lib/troupe/schedd",
		"partitions": filepath.Join(here, "partitions.hcl"), // /etc/troupe/partitions.hcl when installed
		"images":     filepath.Join(here, "images.hcl"),
		"web-addr":   "127.0.0.1:8080",
		"tls-cert":   "/etc/troupe/tls/cert.pem",
	} {
		if got := f.Flags[flag]; got != want {
			t.Errorf("--%s = %q, want %q", flag, got, want)
		}
	}
	// The files it names beside it load too: schedd reads them at start.
	if _, diags := partition.ParseFile(f.Flags["partitions"]); diags.HasErrors() {
		t.Errorf("partitions named by schedd.hcl: %s", partition.FormatDiagnostics(diags))
	}
	if _, err := catalog.Load(f.Flags["images"]); err != nil {
		t.Errorf("images named by schedd.hcl: %v", err)
	}
}

// A broken copy of it fails with file:line:col and the key.
func TestScheddHCLBroken(t *testing.T) {
	src, err := os.ReadFile("schedd.hcl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	line := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "node_timeout") {
			line = i
		}
	}
	if line < 0 {
		t.Fatal("etc/schedd.hcl sets no node_timeout")
	}
	for _, tc := range []struct{ name, replace, want string }{
		{"UnknownKey", `node_timout = "30s"`, `:1: Unsupported argument; An argument named "node_timout" is not expected here. Did you mean "node_timeout"?`},
		{"InvalidValue", `node_timeout = "soon"`, `:16: Invalid duration; node_timeout "soon"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broken := append([]string{}, lines...)
			broken[line] = tc.replace
			p := filepath.Join(t.TempDir(), "schedd.hcl")
			if err := os.WriteFile(p, []byte(strings.Join(broken, "\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := config.Load(p)
			want := p + ":" + strconv.Itoa(line+1) + tc.want
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("err = %v\nwant %s", err, want)
			}
		})
	}
}

// nodelet --config etc/nodelet.hcl.
func TestNodeletHCL(t *testing.T) {
	f, err := nodelet.LoadFile("nodelet.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if f.Images == "" || f.AllowedMountRoots == nil {
		t.Errorf("etc/nodelet.hcl = %+v", f)
	}
	if _, err := catalog.Load(f.Images); err != nil {
		t.Errorf("images named by nodelet.hcl: %v", err)
	}
}

// schedd --partitions etc/partitions.hcl.
func TestPartitionsHCL(t *testing.T) {
	c, diags := partition.ParseFile("partitions.hcl")
	if diags.HasErrors() {
		t.Fatal(partition.FormatDiagnostics(diags))
	}
	if len(c.PartitionNames()) == 0 {
		t.Error("etc/partitions.hcl has no partition")
	}
	for _, d := range diags {
		t.Errorf("warning: %s", partition.FormatDiagnostics(hcl.Diagnostics{d}))
	}
}

// schedd --images and nodelet's images: etc/images.hcl.
func TestImagesHCL(t *testing.T) {
	c, err := catalog.Load("images.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Names()) == 0 {
		t.Error("etc/images.hcl names no image")
	}
}
