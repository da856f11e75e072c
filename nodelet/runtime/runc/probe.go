package runc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// Binaries the driver can run: runc itself and crun, which takes the
// same commands (run -d, state, kill, delete, list) and OCI bundles.
const (
	BinRunc = "runc"
	BinCrun = "crun"
)

// probeTimeout bounds one trial container (it takes milliseconds).
const probeTimeout = 10 * time.Second

// Version returns binary's name and version as `binary --version`
// prints them, e.g. "runc 1.1.5+ds1" or "crun 1.8.1"; just the file's
// name when it prints no "NAME version V" line.
func Version(ctx context.Context, binary string) string {
	name := filepath.Base(binary)
	out, err := exec.CommandContext(ctx, binary, "--version").Output()
	if err != nil {
		return name
	}
	first, _, _ := strings.Cut(string(out), "\n")
	if f := strings.Fields(first); len(f) >= 3 && f[1] == "version" {
		return f[0] + " " + f[2]
	}
	return name
}

// Probe runs one trial container with the OCI runtime binary, the way
// the driver runs a job's (an OCI spec of ociSpec: the same namespaces,
// cgroup /troupe/<id> with a CPU quota, memory and pids limits, seccomp,
// the read-only root), and reports why it could not: a binary present
// is not one that works on this node (crun 1.8 refuses some mixed
// cgroup v1/v2 layouts, for one). The trial's root is an empty
// directory with init bind-mounted, and its process is init with no
// arguments, which prints its usage and exits 2: seeing that usage
// proves the container ran. Its bundle and the runtime's state live in
// a fresh directory under dir, removed afterwards. Needs root.
func Probe(ctx context.Context, binary, init, dir string) error {
	tmp, id, spec, err := trialSpec(init, dir)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	l := layout{dir: tmp}
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(l.bundle(), "config.json"), b, 0o600); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	state := filepath.Join(tmp, "state")
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, "--root", state, "--log", l.log(),
		"run", "--bundle", l.bundle(), id)
	cmd.Dir = l.bundle()
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	// A foreground run deletes its container; make sure of it.
	_, _ = exec.Command(binary, "--root", state, "delete", "--force", id).CombinedOutput()
	cgErr := removeCgroups(id)
	if strings.Contains(out.String(), "usage: troupe-init") {
		return cgErr
	}
	if ctx.Err() != nil {
		return fmt.Errorf("trial container: no answer in %s", probeTimeout)
	}
	msg := lastLogError(l.log())
	if o := strings.TrimSpace(out.String()); o != "" && (msg == "no runc log" || msg == "no message") {
		msg = o
	}
	if runErr == nil {
		runErr = errors.New("exited 0 without running the trial process")
	}
	return fmt.Errorf("trial container: %v: %s", runErr, msg)
}

// trialSpec makes Probe's trial: a fresh directory tmp under dir (the
// caller removes it) with its bundle, home and an empty root, a random
// id and the OCI spec, whose process is init with no arguments.
func trialSpec(init, dir string) (tmp, id string, spec *specs.Spec, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", nil, err
	}
	tmp, err = os.MkdirTemp(dir, "probe-")
	if err != nil {
		return "", "", nil, err
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	id = "troupe-probe-" + hex.EncodeToString(rnd[:])
	l := layout{dir: tmp}
	root := filepath.Join(tmp, "root")
	for _, d := range []string{l.bundle(), l.home(), root} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			os.RemoveAll(tmp)
			return "", "", nil, err
		}
	}
	// The trial's user must reach its root's mountpoints.
	if err := os.Chmod(root, 0o755); err != nil {
		os.RemoveAll(tmp)
		return "", "", nil, err
	}
	s := runtime.Spec{ID: id, Init: init, UID: 65534, GID: 65534, CPUMilli: 1000, Memory: 64 << 20, Pids: 16}
	spec = ociSpec(s, l, root, nil, false)
	spec.Process.Args = []string{runtime.InitPath}
	return tmp, id, spec, nil
}
