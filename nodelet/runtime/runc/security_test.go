package runc

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

// treeState lists every entry under root with its type, mode, owner,
// size, modification time and (files) content hash, or link target.
func treeState(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		desc := fmt.Sprintf("%v %d:%d %d %d", fi.Mode(), st.Uid, st.Gid, fi.Size(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			h := sha256.New()
			_, _ = io.Copy(h, f)
			f.Close()
			desc += fmt.Sprintf(" %x", h.Sum(nil))
		}
		out[strings.TrimPrefix(p, root)] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestImageDirUntouched (issue 19 item 2): a container run from an
// image directory, with a terminal, a mount whose target the image
// lacks, and a command that tries to write everywhere, leaves the image
// directory byte for byte as it was: runc's mountpoints (/dev, /proc,
// /home/work, /.troupe, the mount target) go to the overlay's upper
// layer in the bundle. Before, root created them in the image itself.
func TestImageDirUntouched(t *testing.T) {
	r := newTestRuntime(t)
	init := runtimetest.BuildInit(t)
	image := runtimetest.BusyboxRootfs(t)
	before := treeState(t, image)
	data := t.TempDir()
	for _, uid := range []int{65534, 0} {
		spec, out := runtimetest.NewSpec(t, init, "sh", "-c",
			`touch /probe /etc/probe /nologin 2>/dev/null; mkdir /newdir 2>/dev/null; ls /data/deep >/dev/null && echo mounted`)
		spec.Image = image
		spec.UID, spec.GID = uid, uid
		spec.Mounts = []runtime.Mount{{Source: data, Target: "/data/deep", ReadOnly: true}, {Source: data, Target: "/nologin", ReadOnly: true}}
		c := runtimetest.Start(t, r, spec)
		if e := runtimetest.WaitExit(t, c, 20*time.Second); e.Code != 0 {
			t.Errorf("uid %d: exit %+v, output %q", uid, e, runtimetest.ReadFile(t, out))
		}
		if got := runtimetest.ReadFile(t, out); !strings.Contains(got, "mounted") {
			t.Errorf("uid %d: the mount at a target the image lacks is missing: %q", uid, got)
		}
		if err := c.Destroy(context.Background()); err != nil {
			t.Fatalf("destroy: %v", err)
		}
		if _, err := os.Stat(r.rootMount(spec.ID)); !os.IsNotExist(err) {
			t.Errorf("overlay mountpoint %s left after destroy (%v)", r.rootMount(spec.ID), err)
		}
	}
	after := treeState(t, image)
	for p, was := range before {
		if now, ok := after[p]; !ok {
			t.Errorf("image entry %q removed", p)
		} else if now != was {
			t.Errorf("image entry %q changed: %s, was %s", p, now, was)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("image entry %q created", p)
		}
	}
}

// TestOverlayCleanedUpAfterRestart: the overlay of a container a
// previous nodelet started, which this one does not recover, is
// unmounted by Cleanup.
func TestOverlayCleanedUpAfterRestart(t *testing.T) {
	r := newTestRuntime(t)
	init := runtimetest.BuildInit(t)
	spec, _ := runtimetest.NewSpec(t, init, "sleep", "60")
	spec.Image = runtimetest.BusyboxRootfs(t)
	if _, err := r.Start(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	r2 := &Runtime{binary: r.binary, root: r.root, lib: r.lib, mnt: r.mnt, images: r.images}
	if err := r2.Cleanup(context.Background()); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if _, err := os.Stat(r.rootMount(spec.ID)); !os.IsNotExist(err) {
		t.Errorf("overlay mountpoint left after cleanup (%v)", err)
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), r.rootMount(spec.ID)) {
		t.Errorf("overlay still mounted after cleanup")
	}
}

// TestForkBombStops (issue 12 item 5): a fork bomb in a container with
// half a core and the default pids limit ends when killed (Signal
// SIGKILL, as at the end of walltime or bkill's grace) and when
// destroyed: quota lifted, cgroup frozen, every task killed, thawed.
func TestForkBombStops(t *testing.T) {
	r := newTestRuntime(t)
	init := runtimetest.BuildInit(t)
	for _, how := range []string{"Signal", "Destroy"} {
		t.Run(how, func(t *testing.T) {
			spec, _ := runtimetest.NewSpec(t, init, "sh", "-c", `bomb() { bomb | bomb & }; bomb; sleep 600`)
			spec.CPUMilli, spec.Memory, spec.UID, spec.GID = 500, 1<<30, 65534, 65534
			c := runtimetest.Start(t, r, spec)
			// Let it grow to some thousands of tasks, for 20 s at most.
			procs := cgroupOf(cgroupBase, spec.ID).procs
			eventually.Within(20*time.Second, func() bool { return len(readPids(procs)) >= 1500 })
			n := len(readPids(procs))
			began := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if how == "Signal" {
				if err := c.Signal(syscall.SIGKILL); err != nil {
					t.Fatalf("SIGKILL: %v", err)
				}
				if _, err := c.Wait(ctx); err != nil {
					t.Fatalf("the container outlived SIGKILL by 2 minutes (%d tasks)", n)
				}
			}
			if err := c.Destroy(ctx); err != nil {
				t.Fatalf("destroy: %v", err)
			}
			took := time.Since(began)
			if left := runtimetest.FindProcs(spec.ID); len(left) > 0 {
				t.Fatalf("%d processes left after %s", len(left), took)
			}
			t.Logf("fork bomb of %d tasks at cpu 0.5 gone %s after %s", n, took.Round(time.Millisecond), how)
		})
	}
}

// TestNoRuncEventsLeft (issue 12 item 9): a memory-limited container
// needs no `runc events` child of the nodelet (which outlived a killed
// nodelet): the OOM kill count is read from the cgroup.
func TestNoRuncEventsLeft(t *testing.T) {
	r := newTestRuntime(t)
	init := runtimetest.BuildInit(t)
	spec, _ := runtimetest.NewSpec(t, init, "sleep", "60")
	spec.Memory = 64 << 20
	c := runtimetest.Start(t, r, spec)
	defer func() { _ = c.Destroy(context.Background()) }()
	time.Sleep(300 * time.Millisecond) // a window for a stray runc process to show
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		for i, a := range args {
			if a == "events" && i+1 < len(args) && strings.Contains(strings.Join(args[i:], " "), spec.ID) {
				t.Errorf("pid %s runs %q", e.Name(), strings.Join(args, " "))
			}
		}
	}
}

// probeSource calls what the seccomp profile refuses, and prints one
// "name=errno" line each ("name=ok" when the kernel allowed it).
const probeSource = `package main

import (
	"fmt"
	"syscall"
)

func show(name string, err syscall.Errno) {
	if err == 0 {
		fmt.Printf("%s=ok\n", name)
		return
	}
	fmt.Printf("%s=%d\n", name, int(err))
}

func main() {
	_, _, e := syscall.Syscall(syscall.SYS_KEYCTL, 0, ^uintptr(2), 0) // KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING
	show("keyctl", e)
	_, _, e = syscall.Syscall(syscall.SYS_ADD_KEY, 0, 0, 0)
	show("add_key", e)
	_, _, e = syscall.Syscall(syscall.SYS_UNSHARE, syscall.CLONE_NEWUSER, 0, 0)
	show("unshare", e)
	_, _, e = syscall.Syscall(syscall.SYS_PIVOT_ROOT, 0, 0, 0)
	show("pivot_root", e)
	_, _, e = syscall.Syscall(syscall.SYS_GETPID, 0, 0, 0)
	show("getpid", e)
}
`

// TestSeccomp (issue 12 item 9): keyrings, new user namespaces (both
// the syscall and util-linux's unshare -U) and pivot_root are refused inside a
// container, for a user and for root; ordinary programs run (MPI: see
// e2e's session tests).
func TestSeccomp(t *testing.T) {
	r := newTestRuntime(t)
	init := runtimetest.BuildInit(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "probe.go")
	if err := os.WriteFile(src, []byte(probeSource), 0o644); err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(dir, "probe")
	cmd := exec.Command("go", "build", "-o", probe, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, b)
	}
	want := "keyctl=1\nadd_key=1\nunshare=1\npivot_root=1\ngetpid=ok\nunshare-U=refused\nordinary=ok"
	for _, uid := range []int{1234, 0} {
		got, code := runShell(t, r, init, `/probe; if unshare -U true 2>/dev/null; then echo unshare-U=allowed; else echo unshare-U=refused; fi; ls / >/dev/null && echo ordinary=ok`,
			func(s *runtime.Spec) {
				s.UID, s.GID = uid, uid
				s.Mounts = append(s.Mounts, runtime.Mount{Source: probe, Target: "/probe", ReadOnly: true})
			})
		if got != want || code != 0 {
			t.Errorf("uid %d: got %q (exit %d), want %q", uid, got, code, want)
		}
	}
}
