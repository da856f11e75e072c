package runc

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

// TestSuiteImages runs the shared suite with runc over every image kind
// the node can unpack: a busybox rootfs, that rootfs as a SIF, a docker
// save archive, an OCI layout and an OCI archive.
func TestSuiteImages(t *testing.T) {
	r := newTestRuntime(t)
	init := runtimetest.BuildInit(t)
	rootfs := runtimetest.BusyboxRootfs(t)
	docker, layout, ociArchive := runtimetest.BuildOCI(t, rootfs)
	images := []struct{ name, path string }{
		{"Rootfs", rootfs},
		{"SIF", runtimetest.BuildSIF(t, rootfs)},
		{"DockerArchive", docker},
		{"OCILayout", layout},
		{"OCIArchive", ociArchive},
	}
	for _, im := range images {
		t.Run(im.name, func(t *testing.T) {
			runtimetest.RunWith(t, r, runtimetest.Options{Image: im.path, Init: init})
		})
	}
	// Unpacked once per digest: the docker archive and the OCI layout
	// hold the same image.
	ents, _ := filepath.Glob(filepath.Join(r.images.Dir(), "*", "rootfs"))
	if len(ents) != 2 { // one OCI digest, one SIF
		t.Errorf("image cache holds %d rootfs, want 2 (one per digest): %v", len(ents), ents)
	}
	if left, _ := filepath.Glob(filepath.Join(r.images.Dir(), ".unpack-*")); len(left) > 0 {
		t.Errorf("unpack leftovers: %v", left)
	}
	if _, err := os.Stat(filepath.Join(rootfs, "bin", "sh")); err != nil {
		t.Errorf("source rootfs damaged: %v", err)
	}
}
