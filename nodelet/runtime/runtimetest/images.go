package runtimetest

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/sylabs/sif/v2/pkg/sif"
)

// busyboxApplets are linked in BusyboxRootfs: what the suite and the
// isolation tests run.
var busyboxApplets = []string{
	"sh", "sleep", "pwd", "true", "false", "echo", "cat", "id", "hostname",
	"touch", "tr", "grep", "cut", "readlink", "env", "ls", "head", "dd", "seq",
}

// BusyboxRootfs builds a minimal rootfs (busybox-static and its applets
// in /bin, empty /usr, /etc, /tmp) and returns its path. It skips the
// test when busybox is missing.
func BusyboxRootfs(t testing.TB) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("SKIP: needs busybox (package busybox-static, `make deps`)")
	}
	if out, err := exec.Command("ldd", bb).CombinedOutput(); err == nil && !bytes.Contains(out, []byte("not a dynamic")) {
		t.Skipf("SKIP: %s is not static (install busybox-static)", bb)
	}
	root := filepath.Join(t.TempDir(), "rootfs")
	for _, d := range []string{"bin", "usr/bin", "etc", "tmp", "home/work", "proc", "sys", "dev"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range busyboxApplets {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.Chmod(filepath.Join(root, "tmp"), 0o1777)
	if err := os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte("root:x:0:0::/root:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// BuildSIF packs rootfs into a SIF (mksquashfs, then sylabs/sif) and
// returns its path. It skips the test when mksquashfs is missing.
func BuildSIF(t testing.TB, rootfs string) string {
	t.Helper()
	if _, err := exec.LookPath("mksquashfs"); err != nil {
		t.Skip("SKIP: needs mksquashfs (package squashfs-tools, `make deps`)")
	}
	dir := t.TempDir()
	sq := filepath.Join(dir, "rootfs.squashfs")
	if out, err := exec.Command("mksquashfs", rootfs, sq, "-noappend", "-no-progress", "-quiet").CombinedOutput(); err != nil {
		t.Fatalf("mksquashfs: %v\n%s", err, out)
	}
	f, err := os.Open(sq)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	di, err := sif.NewDescriptorInput(sif.DataPartition, f,
		sif.OptPartitionMetadata(sif.FsSquash, sif.PartPrimSys, goruntime.GOARCH))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "image.sif")
	fi, err := sif.CreateContainerAtPath(path, sif.OptCreateWithDescriptors(di))
	if err != nil {
		t.Fatalf("creating SIF: %v", err)
	}
	if err := fi.UnloadContainer(); err != nil {
		t.Fatal(err)
	}
	return path
}

// BuildOCI packs rootfs as a one-layer image and writes it three ways:
// a `docker save` archive, an OCI image layout directory and an OCI
// archive (a tar of that layout). It returns their paths.
func BuildOCI(t testing.TB, rootfs string) (dockerArchive, ociLayout, ociArchive string) {
	t.Helper()
	dir := t.TempDir()
	layerTar := filepath.Join(dir, "layer.tar")
	if err := tarDir(rootfs, layerTar, ""); err != nil {
		t.Fatal(err)
	}
	layer, err := tarball.LayerFromFile(layerTar)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("troupe.test/busybox:latest")
	dockerArchive = filepath.Join(dir, "docker.tar")
	if err := tarball.WriteToFile(dockerArchive, tag, img); err != nil {
		t.Fatal(err)
	}
	ociLayout = filepath.Join(dir, "layout")
	p, err := layout.Write(ociLayout, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	ociArchive = filepath.Join(dir, "oci.tar")
	if err := tarDir(ociLayout, ociArchive, ""); err != nil {
		t.Fatal(err)
	}
	return dockerArchive, ociLayout, ociArchive
}

// tarDir writes the tree at src into a tar file dst.
func tarDir(src, dst, prefix string) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "." {
			return nil
		}
		link := ""
		if fi.Mode()&os.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = filepath.Join(prefix, rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			r, err := os.Open(p)
			if err != nil {
				return err
			}
			defer r.Close()
			if _, err := io.Copy(tw, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// TamperOCILayout is what an attacker makes of the OCI layout at
// genuine: a copy in a new directory with its index.json, manifest and
// config, but the first layer blob (its file name kept) replaced by a
// gzipped tar of rootfs. It returns the copy's path and the layer blob's
// path in it.
func TamperOCILayout(t testing.TB, genuine, rootfs string) (layoutDir, blob string) {
	t.Helper()
	p, err := layout.FromPath(genuine)
	if err != nil {
		t.Fatal(err)
	}
	img, err := onlyImage(p)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) == 0 {
		t.Fatalf("layers of %s: %v", genuine, err)
	}
	d, err := layers[0].Digest()
	if err != nil {
		t.Fatal(err)
	}
	layoutDir = filepath.Join(t.TempDir(), "evil")
	if out, err := exec.Command("cp", "-a", genuine, layoutDir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	blob = filepath.Join(layoutDir, "blobs", d.Algorithm, d.Hex)
	plain := filepath.Join(t.TempDir(), "evil.tar")
	if err := tarDir(rootfs, plain, ""); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", "-c", `gzip -c "$1" > "$2"`, "sh", plain, blob).CombinedOutput(); err != nil {
		t.Fatalf("gzip: %v: %s", err, out)
	}
	return layoutDir, blob
}

// onlyImage is the first image of a layout's index.
func onlyImage(p layout.Path) (v1.Image, error) {
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) == 0 {
		return nil, errors.New("empty index")
	}
	return idx.Image(m.Manifests[0].Digest)
}

// TamperSIF is what an attacker makes of the SIF at genuine: a copy in
// a new directory whose header (ID, times, descriptors) is the genuine
// one, but whose squashfs partition holds rootfs (its squashfs, padded
// with zeros to the partition's size; rootfs must pack smaller than the
// genuine partition). It returns the copy's path.
func TamperSIF(t testing.TB, genuine, rootfs string) string {
	t.Helper()
	fi, err := sif.LoadContainerFromPath(genuine, sif.OptLoadWithFlag(os.O_RDONLY))
	if err != nil {
		t.Fatal(err)
	}
	d, err := fi.GetDescriptor(sif.WithPartitionType(sif.PartPrimSys))
	_ = fi.UnloadContainer()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sq := filepath.Join(dir, "evil.squashfs")
	if out, err := exec.Command("mksquashfs", rootfs, sq, "-noappend", "-no-progress", "-quiet").CombinedOutput(); err != nil {
		t.Fatalf("mksquashfs: %v\n%s", err, out)
	}
	evil, err := os.ReadFile(sq)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(evil)) > d.Size() {
		t.Fatalf("the tampered squashfs (%d bytes) exceeds the genuine partition (%d)", len(evil), d.Size())
	}
	b, err := os.ReadFile(genuine)
	if err != nil {
		t.Fatal(err)
	}
	part := b[d.Offset() : d.Offset()+d.Size()]
	clear(part)
	copy(part, evil)
	path := filepath.Join(dir, "evil.sif")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
