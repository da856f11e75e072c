package nodelet

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

// TestToolCopies: containers link one copy of a binary, which nobody may
// write; a binary rewritten in place, or replaced by another file (an
// upgrade), gets a fresh copy for the next container, while those linked
// before keep what they had; the tools directory holds only the current
// copies.
func TestToolCopies(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "troupe-init")
	if err := os.WriteFile(src, []byte("v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	tc := newToolCopies(filepath.Join(dir, "tools"))
	link := func(name string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := tc.link(src, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	content := func(p string) string { t.Helper(); return runtimetest.ReadFile(t, p) }
	sameFile := func(a, b string) bool {
		t.Helper()
		fa, err := os.Stat(a)
		if err != nil {
			t.Fatal(err)
		}
		fb, err := os.Stat(b)
		if err != nil {
			t.Fatal(err)
		}
		return os.SameFile(fa, fb)
	}
	a, b := link("a"), link("b")
	if !sameFile(a, b) || sameFile(a, src) {
		t.Errorf("two containers' links: the same copy %v, the source itself %v; want one copy, not the source", sameFile(a, b), sameFile(a, src))
	}
	if fi, err := os.Stat(a); err != nil || fi.Mode().Perm() != 0o555 {
		t.Errorf("the copy's mode: %v (%v), want 0555", fi.Mode().Perm(), err)
	}

	if err := os.WriteFile(src, []byte("v2, rewritten"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := link("c")
	if content(c) != "v2, rewritten" || content(a) != "v1" {
		t.Errorf("after a rewrite: new link %q, old %q; want the new content and the old kept", content(c), content(a))
	}

	next := filepath.Join(dir, "next")
	if err := os.WriteFile(next, []byte("v3, new"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, src); err != nil {
		t.Fatal(err)
	}
	d := link("d")
	if content(d) != "v3, new" || content(c) != "v2, rewritten" {
		t.Errorf("after an upgrade: new link %q, old %q; want the new file and the old kept", content(d), content(c))
	}
	ents, err := os.ReadDir(filepath.Join(dir, "tools"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		t.Errorf("the tools directory holds %d entries, want the current copy only", len(ents))
	}
}

// TestAgentLayerNotMounts: a runc container of an image (busybox's
// rootfs) sees its hosts files, its session's hostfiles, troupe-init and
// (with ssh) troupe-ssh at their paths, read-only, from the layer over
// its root: none of them is a mount of its own.
func TestAgentLayerNotMounts(t *testing.T) {
	needRunc(t)
	root := busyboxRootfs(t)
	image := func(j *jobspec.Job) { j.Image = root }
	s := newTestSchedd(t)
	cfg, _ := startAgent(t, s, RuntimeRunc)
	probe := sh(`grep -cE ' (/etc/hosts|/etc/hostname|/\.troupe/bin/troupe-init|/\.troupe/bin/ssh|/\.troupe/bin/troupe-ssh|/\.troupe/session|/\.troupe/slurm/srun) ' /proc/self/mountinfo
cat /etc/hostname
grep -q main1 /etc/hosts && echo hosts
test -s /.troupe/session/hostfile && echo hostfile
test -x /.troupe/bin/ssh && echo ssh || echo nossh
for f in /etc/hosts /.troupe/session/hostfile /.troupe/bin/troupe-init; do (echo x >> $f) 2>/dev/null && echo "$f writable"; done
echo done`)
	for _, c := range []struct {
		name string
		edit func(*jobspec.Job)
		want string
	}{
		{"one container", image, "0\nmain1\nhosts\nhostfile\nnossh\ndone"},
		{"ssh = true", func(j *jobspec.Job) { image(j); j.SSH = true }, "0\nmain1\nhosts\nhostfile\nssh\ndone"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cwd := t.TempDir()
			id := s.submit(t, cwd, c.edit, probe)
			s.waitState(t, id, "main1", api.ContainerExited)
			out := runtimetest.ReadFile(t, filepath.Join(cwd, fmt.Sprintf("troupe-%d.main1.out", id)))
			if out != c.want {
				t.Errorf("container sees %q, want %q", out, c.want)
			}
			s.waitJob(t, id, func(j api.Job) bool { return j.State.Terminal() })
			assertNothingLeft(t, cfg, RuntimeRunc, s.containerIDs(t, id))
		})
	}
}

// TestAgentSrunEveryNetwork: every container gets troupe's srun first on
// its PATH, whatever its network: runc on the node's network (no session
// network) lays it in at /.troupe/slurm/srun, plain processes find it in
// the directory of Slurm's links make lays out beside troupe-slurm
// (PREFIX/libexec/troupe/slurm for PREFIX/bin/troupe-slurm).
func TestAgentSrunEveryNetwork(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt string) {
		prefix := t.TempDir()
		bin := filepath.Join(prefix, "bin", SlurmName)
		links := filepath.Join(prefix, "libexec", "troupe", "slurm")
		for _, d := range []string{filepath.Dir(bin), links} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		// A stand-in for troupe-slurm: it says what it was run as.
		if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"troupe's $(basename $0)\" \"$@\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../../../bin/"+SlurmName, filepath.Join(links, "srun")); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(prefix, 0o755); err != nil {
			t.Fatal(err)
		}
		s := newTestSchedd(t)
		startAgentCause(t, s, rt, t.TempDir(), func(c *Config) { c.Network, c.SlurmBinary = NetworkHost, bin })
		cwd := t.TempDir()
		id := s.submit(t, cwd, nil, sh(`srun -n1 hostname`))
		s.waitState(t, id, "main1", api.ContainerExited)
		out := runtimetest.ReadFile(t, filepath.Join(cwd, fmt.Sprintf("troupe-%d.main1.out", id)))
		if out != "troupe's srun -n1 hostname" {
			t.Errorf("srun in a %s container on the node's network: %q, want troupe's", rt, out)
		}
	})
}

// TestAgentHostImageHome: a container of the host image sees the job
// user's home (the node's user database names it) at its path, writable
// as the user, and as HOME, when it lies under the node's allowed mount
// roots; otherwise the job keeps the session's home. (The job runs as
// the test's user, root here, whose home is among the default roots.)
func TestAgentHostImageHome(t *testing.T) {
	needRunc(t)
	u, err := user.Current()
	if err != nil || u.HomeDir == "" || u.HomeDir == "/" {
		t.Skipf("SKIP: the test's user has no home of its own (%v)", err)
	}
	for _, c := range []struct {
		name  string
		roots []string
		home  string
	}{
		{"under the roots", []string{"/tmp", u.HomeDir}, u.HomeDir},
		{"outside the roots", []string{"/tmp"}, "/home/work"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newTestSchedd(t)
			startAgentCause(t, s, RuntimeRunc, t.TempDir(), func(cfg *Config) { cfg.AllowedMountRoots = c.roots })
			cwd := t.TempDir()
			mark := ".troupe-home-test-" + filepath.Base(cwd)
			t.Cleanup(func() { os.Remove(filepath.Join(u.HomeDir, mark)) })
			id := s.submit(t, cwd, nil, sh(`echo "$HOME"; echo here > "$HOME/`+mark+`" && echo wrote`))
			s.waitState(t, id, "main1", api.ContainerExited)
			out := runtimetest.ReadFile(t, filepath.Join(cwd, fmt.Sprintf("troupe-%d.main1.out", id)))
			if out != c.home+"\nwrote" {
				t.Errorf("HOME and a write there: %q, want %q", out, c.home+"\nwrote")
			}
			_, err := os.Stat(filepath.Join(u.HomeDir, mark))
			if written := err == nil; written != (c.home == u.HomeDir) {
				t.Errorf("written in the node's %s: %v", u.HomeDir, written)
			}
		})
	}
}
