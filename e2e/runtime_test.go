package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

// TestNodeRuntime runs jobs through a dev cluster whose nodelets read a
// nodelet.hcl ($TROUPE_NODELET_CONFIG): a catalog image (a SIF built
// here), data folders under the allowed root, refused mounts, an unknown
// image, an OOM kill, fake GPUs, and bpeek.
func TestNodeRuntime(t *testing.T) {
	needRunc(t)
	rootfs := runtimetest.BusyboxRootfs(t)
	sif := runtimetest.BuildSIF(t, rootfs)
	etc := t.TempDir()
	allowed := t.TempDir()
	_ = os.Chmod(allowed, 0o755)
	data := filepath.Join(allowed, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "hello"), []byte("hello from data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(allowed, "escape")); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		p := filepath.Join(etc, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	images := write("images.hcl", fmt.Sprintf("image \"busybox\" {\n  source = %q\n}\n", sif))
	t.Setenv("TROUPE_NODELET_CONFIG", write("nodelet.hcl", fmt.Sprintf(
		"images = \"images.hcl\"\nallowed_mount_roots = [%q]\nfake_gpus = 2\n", allowed)))
	c := startCluster(t, 1, "2", "--images", images)

	out, errOut, code := c.run(c.dir, "bhosts", "-o", "json")
	if code != 0 || !regexp.MustCompile(`"gpu":\s*2\b`).MatchString(out) {
		t.Errorf("bhosts: node capacity without 2 GPUs (exit %d): %s%s", code, out, errOut)
	}
	// The node registers the OCI runtime its runc driver runs: crun
	// where crun works, else libcontainer in-process, else runc
	// (nodelet --oci-runtime auto).
	if !regexp.MustCompile(`"oci_runtime":\s*"(runc \d|crun \d|libcontainer v\d)`).MatchString(out) {
		t.Errorf("bhosts: no oci_runtime of runc, crun or libcontainer with a version: %s", out)
	}

	job := func(image, command, mounts, extra string) string {
		return fmt.Sprintf(`
job "rt" {
  resources {
    cpu    = 1
    memory = "64MiB"
  }
  image   = %q
  command = ["sh", "-c", %q]
  %s
  %s
  output = "rt-%%j.out"
}`, image, command, mounts, extra)
	}
	mount := func(src string, ro bool) string {
		return fmt.Sprintf("mount \"data\" {\n    source = %q\n    target = \"/home/work/data\"\n    readonly = %t\n  }", src, ro)
	}
	output := func(dir string, id uint64) string {
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rt-%d.out", id)))
		return string(b)
	}

	t.Run("CatalogSIFWithReadonlyData", func(t *testing.T) {
		dir := t.TempDir()
		id, _ := c.submit(dir, "sif", job("busybox",
			"cat /home/work/data/hello; touch /home/work/data/x 2>/dev/null && echo writable || echo readonly; ls /bin/busybox",
			mount(data, true), ""), "--wait")
		j := c.job(id)
		got := output(dir, id)
		if j.State != api.JobCompleted || !strings.Contains(got, "hello from data\nreadonly\n/bin/busybox") {
			t.Fatalf("job %d %s (%s): output %q", id, j.State, j.Reason, got)
		}
		peek, errOut, code := c.run(dir, "bpeek", strconv.FormatUint(id, 10))
		if code != 0 || peek != got {
			t.Errorf("bpeek = %q (exit %d, %s), want the output file %q", peek, code, errOut, got)
		}
	})

	refused := []struct {
		name, mounts, image, want string
		atSubmit                  bool // bsub refuses; else the job fails before it runs
	}{
		{"MountOutsideRoots", mount("/etc", true), "busybox", "outside the allowed roots", false},
		{"MountSymlinkEscape", mount(filepath.Join(allowed, "escape"), true), "busybox", "symbolic link", false},
		{"MountDotDot", mount(data+"/../../etc", true), "busybox", `contains ".."`, false},
		{"UnknownImage", "", "pytorch-9", `image "pytorch-9": unknown image (known images: busybox`, true},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "j.hcl")
			_ = os.WriteFile(path, []byte(job(tc.image, "echo started", tc.mounts, "")), 0o644)
			out, errOut, code := c.run(dir, "bsub", "--wait", path)
			if tc.atSubmit {
				if code != 1 || out != "" || !strings.Contains(errOut, tc.want) {
					t.Errorf("bsub: exit %d, stdout %q, stderr %q; want exit 1 with %q and nothing submitted", code, out, errOut, tc.want)
				}
				return
			}
			m := submitted.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("bsub: %s%s", out, errOut)
			}
			id, _ := strconv.ParseUint(m[1], 10, 64)
			j := c.waitState(id, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() })
			msg := j.Reason + " " + j.Containers[0].Message
			if j.State != api.JobFailed || !strings.Contains(msg, tc.want) || strings.Contains(output(dir, id), "started") {
				t.Errorf("job %d %s: %q (output %q), want FAILED with %q and nothing run", id, j.State, msg, output(dir, id), tc.want)
			}
		})
	}

	t.Run("OOMKill", func(t *testing.T) {
		dir := t.TempDir()
		id, _ := c.submit(dir, "oom", job("host", "x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo survived", "", ""), "--wait")
		j := c.job(id)
		ct := j.Containers[0]
		if j.State != api.JobFailed || ct.State != api.ContainerOOM || !strings.Contains(ct.Message, "out of memory (limit 64MiB)") {
			t.Errorf("job %d %s (%s), container %s %q; want FAILED, oom, out of memory (limit 64MiB)", id, j.State, j.Reason, ct.State, ct.Message)
		}
	})

	t.Run("FractionalGPU", func(t *testing.T) {
		dir := t.TempDir()
		id, _ := c.submit(dir, "gpu", strings.Replace(job("host", "env | grep -E '^(CUDA|NVIDIA)_' | sort", "", ""),
			`memory = "64MiB"`, "memory = \"64MiB\"\n    gpu = 0.5", 1), "--wait")
		j := c.job(id)
		got := output(dir, id)
		// The node offers two fake GPUs (fake_gpus in its nodelet.hcl),
		// so a half share is always placeable: none assigned is the
		// feature broken, not a machine without GPUs.
		if j.State != api.JobCompleted || len(j.Containers[0].GPUs) != 1 || j.Containers[0].GPUs[0].Share != 0.5 {
			t.Fatalf("job %d %s (%s) with gpu = 0.5 on a node of 2 fake GPUs: shares %+v, want one half share; output %q",
				id, j.State, j.Reason, j.Containers[0].GPUs, got)
		}
		// runc gives the container only its device node: CUDA counts it
		// as ordinal 0 whatever its index on the node.
		for _, want := range []string{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8192M",
			"CUDA_VISIBLE_DEVICES=0\n", fmt.Sprintf("NVIDIA_VISIBLE_DEVICES=GPU-fake-%04d", j.Containers[0].GPUs[0].Device)} {
			if !strings.Contains(got, want) {
				t.Errorf("job %d %s: env %q lacks %q", id, j.State, got, want)
			}
		}
	})

	t.Run("BpeekFollow", func(t *testing.T) {
		dir := t.TempDir()
		id, _ := c.submit(dir, "follow", job("host", "for i in 1 2 3; do echo line$i; sleep 0.3; done", "", ""))
		out, errOut, code := c.run(dir, "bpeek", "-f", strconv.FormatUint(id, 10))
		if code != 0 || out != "line1\nline2\nline3\n" {
			t.Errorf("bpeek -f = %q (exit %d, %s), want the three lines", out, code, errOut)
		}
	})
}
