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

// TestOCIAutoFallsBackToRunc: with --oci-runtime auto, a crun that
// fails its trial container leaves runc in charge, and one warning
// says why.
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
	line := "crun present but not working here: trial container: exit status 1: cgroups in hybrid mode not supported; using runc"
	if out := logs.String(); strings.Count(out, "\n") != 1 || !strings.Contains(out, "level=WARN") ||
		!strings.Contains(out, line) || !strings.Contains(out, crun) {
		t.Errorf("log = %q, want one warning with %q and the binary %s", out, line, crun)
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
	case got == rc && strings.Contains(logs.String(), "crun present but not working here: trial container: "):
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
	if _, err := newRunc(Config{StateDir: state}, rc); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(state, ociFile)); string(b) != "runc\n" {
		t.Errorf("%s = %q after starting with runc, want runc", ociFile, b)
	}
}
