package nodelet

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/nodelet/runtime/runc"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

// failingCrun puts a crun stand-in first on $PATH that runs no
// container and says why, as crun 1.8 does on a mixed cgroup v1/v2 node.
func failingCrun(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	crun := filepath.Join(dir, "crun")
	if err := os.WriteFile(crun, []byte("#!/bin/sh\necho 'cgroups in hybrid mode not supported' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return crun
}

// ociBinary is the binary ociRuntime picks ("" for libcontainer).
func ociBinary(c Config, log *slog.Logger) (string, error) {
	r, err := ociRuntime(c, log)
	if err != nil {
		return "", err
	}
	return r.Binary(), nil
}

// TestOCIAutoFallsBackToRunc: with --oci-runtime auto, a crun that
// fails its trial container, then libcontainer that cannot run (this
// test binary is no container init) leave runc in charge, and one
// warning each says why.
func TestOCIAutoFallsBackToRunc(t *testing.T) {
	want, err := runc.Find("")
	if err != nil {
		t.Skipf("SKIP: needs the runc binary: %v", err)
	}
	crun := failingCrun(t)
	var logs bytes.Buffer
	c := Config{OCIRuntime: OCIAuto, InitBinary: "/bin/true", StateDir: t.TempDir()}
	got, err := ociBinary(c, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil || got != want {
		t.Fatalf("ociBinary = %q, %v; want runc at %s", got, err, want)
	}
	line := "crun present but not working here: trial container: exit status 1: cgroups in hybrid mode not supported; trying libcontainer"
	line2 := "libcontainer does not work here: libcontainer: " + runc.ErrNoInit.Error() + "; using runc"
	if out := logs.String(); strings.Count(out, "\n") != 2 || strings.Count(out, "level=WARN") != 2 ||
		!strings.Contains(out, line) || !strings.Contains(out, crun) || !strings.Contains(out, line2) {
		t.Errorf("log = %q, want a warning with %q and the binary %s, and one with %q", out, line, crun, line2)
	}
	if ents, _ := os.ReadDir(filepath.Join(c.StateDir, "probe")); len(ents) != 0 {
		t.Errorf("the trial left %d entries behind", len(ents))
	}
}

// TestOCICrunExplicit: --oci-runtime crun with a crun that fails its
// trial, or none at all, is an error naming the cause; runc is not
// tried.
func TestOCICrunExplicit(t *testing.T) {
	crun := failingCrun(t)
	c := Config{OCIRuntime: OCICrun, InitBinary: "/bin/true", StateDir: t.TempDir()}
	_, err := ociBinary(c, slog.New(slog.DiscardHandler))
	want := "--oci-runtime crun: " + crun + " does not work here: trial container: exit status 1: cgroups in hybrid mode not supported"
	if err == nil || err.Error() != want {
		t.Errorf("ociBinary = %v, want %q", err, want)
	}

	t.Run("Missing", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		if _, err := findBinary("crun"); err == nil {
			t.Skip("SKIP: crun is installed in a system directory; the missing-crun case cannot be made here")
		}
		_, err := ociBinary(c, slog.New(slog.DiscardHandler))
		if err == nil || !strings.HasPrefix(err.Error(), "--oci-runtime crun: crun not found") {
			t.Errorf("ociBinary without crun = %v, want crun not found", err)
		}
	})
}

// TestOCILibcontainerExplicit: --oci-runtime libcontainer in a binary
// that cannot run it is an error naming why; runc is not tried.
func TestOCILibcontainerExplicit(t *testing.T) {
	c := Config{OCIRuntime: OCILibcontainer, InitBinary: "/bin/true", StateDir: t.TempDir()}
	_, err := ociBinary(c, slog.New(slog.DiscardHandler))
	want := "--oci-runtime libcontainer: does not work here: libcontainer: " + runc.ErrNoInit.Error()
	if err == nil || err.Error() != want {
		t.Errorf("ociBinary = %v, want %q", err, want)
	}
}

// TestOCIAutoRealCrun: the installed crun, if any, is taken when its
// trial container runs and otherwise leaves runc with the warning
// (crun 1.8 on a mixed cgroup v1/v2 node).
func TestOCIAutoRealCrun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: the trial container needs root (euid 0)")
	}
	crun, err := findBinary("crun")
	if err != nil {
		t.Skipf("SKIP: crun is not installed (contrib/dev/install-deps installs it): %v", err)
	}
	rc, err := runc.Find("")
	if err != nil {
		t.Skipf("SKIP: needs the runc binary: %v", err)
	}
	var logs bytes.Buffer
	c := Config{OCIRuntime: OCIAuto, InitBinary: runtimetest.BuildInit(t), StateDir: t.TempDir()}
	got, err := ociBinary(c, slog.New(slog.NewTextHandler(&logs, nil)))
	switch {
	case err != nil:
		t.Fatal(err)
	case got == crun:
		t.Logf("crun works here: %s", logs.String())
	case got == rc && strings.Contains(logs.String(), "crun present but not working here: trial container: ") &&
		strings.Contains(logs.String(), "libcontainer does not work here"):
		t.Logf("crun does not work here, runc chosen: %s", logs.String())
	default:
		t.Errorf("ociBinary = %q (log %q); want crun %s, or runc %s with the warning", got, logs.String(), crun, rc)
	}
}

// TestOCIRuncSkipsProbe: --oci-runtime runc never runs crun.
func TestOCIRuncSkipsProbe(t *testing.T) {
	want, err := runc.Find("")
	if err != nil {
		t.Skipf("SKIP: needs the runc binary: %v", err)
	}
	failingCrun(t)
	var logs bytes.Buffer
	got, err := ociBinary(Config{OCIRuntime: OCIRunc, StateDir: t.TempDir()}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil || got != want || logs.Len() != 0 {
		t.Errorf("ociBinary = %q, %v (log %q); want runc at %s, silently", got, err, logs.String(), want)
	}
}

// TestOCIKeepsPreviousRuntime: containers a previous run left under the
// runc driver's root stay with the binary that started them: auto keeps
// it without a trial, an explicit other choice is refused, and newRunc
// records the choice for the next start.
func TestOCIKeepsPreviousRuntime(t *testing.T) {
	rc, err := runc.Find("")
	if err != nil {
		t.Skipf("SKIP: needs the runc binary: %v", err)
	}
	crun := failingCrun(t)
	state := t.TempDir()
	if err := os.MkdirAll(filepath.Join(state, "runc", "troupe-k1"), 0o700); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	// No record: an older nodelet, which ran runc.
	got, err := ociBinary(Config{OCIRuntime: OCIAuto, InitBinary: "/bin/true", StateDir: state}, log)
	if err != nil || got != rc || strings.Contains(logs.String(), "crun present") {
		t.Errorf("auto with runc's containers left = %q, %v (log %q); want runc without a crun trial", got, err, logs.String())
	}
	_, err = ociBinary(Config{OCIRuntime: OCICrun, InitBinary: "/bin/true", StateDir: state}, log)
	want := "--oci-runtime crun: containers a previous run started with runc remain under " + filepath.Join(state, "runc") + "; use --oci-runtime runc until they are gone"
	if err == nil || err.Error() != want {
		t.Errorf("explicit crun with runc's containers left = %v, want %q", err, want)
	}

	// A previous run on crun: auto keeps crun although its trial would fail.
	if err := os.WriteFile(filepath.Join(state, ociFile), []byte("crun\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ociBinary(Config{OCIRuntime: OCIAuto, InitBinary: "/bin/true", StateDir: state}, log); err != nil || got != crun {
		t.Errorf("auto with crun's containers left = %q, %v; want %s", got, err, crun)
	}
	if _, err := ociBinary(Config{OCIRuntime: OCIRunc, StateDir: state}, log); err == nil || !strings.Contains(err.Error(), "started with crun") {
		t.Errorf("explicit runc with crun's containers left = %v, want refused", err)
	}

	// Once none is left, the choice is free again; newRunc records it.
	if err := os.Remove(filepath.Join(state, "runc", "troupe-k1")); err != nil {
		t.Fatal(err)
	}

	// A previous run in-process: its containers are under libcontainer's
	// root, known to no binary's: auto keeps it (here: cannot, and says
	// why), an explicit binary is refused.
	lib := filepath.Join(runc.LibcontainerRoot(state), "troupe-k2")
	if err := os.MkdirAll(lib, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := ociBinary(Config{OCIRuntime: OCIAuto, InitBinary: "/bin/true", StateDir: state}, log); err == nil ||
		!strings.Contains(err.Error(), "containers a previous run started with libcontainer remain under "+runc.LibcontainerRoot(state)) {
		t.Errorf("auto with libcontainer's containers left, in a binary that cannot run them = %v, want refused", err)
	}
	want = "--oci-runtime runc: containers a previous run started with libcontainer remain under " + runc.LibcontainerRoot(state) + "; use --oci-runtime libcontainer until they are gone"
	if _, err := ociBinary(Config{OCIRuntime: OCIRunc, StateDir: state}, log); err == nil || err.Error() != want {
		t.Errorf("explicit runc with libcontainer's containers left = %v, want %q", err, want)
	}
	if err := os.Remove(lib); err != nil {
		t.Fatal(err)
	}
	if _, err := newRunc(Config{StateDir: state}, rc, state); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(state, ociFile)); string(b) != "runc\n" {
		t.Errorf("%s = %q after starting with runc, want runc", ociFile, b)
	}
}
