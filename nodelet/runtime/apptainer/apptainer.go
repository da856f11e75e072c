// Package apptainer runs troupe containers with the apptainer (or
// singularity) binary of nodes that have one, the way HPC sites run
// their SIF images.
//
// Every container is one `apptainer exec` in its own process group,
// supervised as package process supervises a host process:
//
//	apptainer exec --containall --cleanenv --uts --hostname main1
//	    --home <Home, else Dir/home>:/home/work --pwd WORKDIR
//	    --bind SRC:DST[:ro] ... --bind troupe-init:/.troupe/bin/troupe-init:ro
//	    IMAGE /.troupe/bin/troupe-init [INITARGS] run -- ARGS...
//
// The environment travels as APPTAINERENV_KEY=value (with --cleanenv
// nothing else enters). IMAGE is the SIF or sandbox directory as given,
// "/" for "host", oci:DIR for an OCI layout and oci-archive: or
// docker-archive: for archives. A Spec.NetNS is joined with nsenter
// before apptainer starts. CPU and memory limits are not applied by this
// driver (apptainer's --cpus/--memory need cgroups delegation): schedd
// still accounts them.
//
// It must not import the agent (package nodelet), internal/api or
// sched/...: a driver knows containers, not jobs.
package apptainer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/troupe-hpc/troupe/nodelet/image"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
	"github.com/troupe-hpc/troupe/nodelet/runtime/process"
)

// Name is the runtime's name.
const Name = "apptainer"

// ErrNoApptainer means neither apptainer nor singularity was found.
var ErrNoApptainer = errors.New("apptainer (or singularity) binary not found")

// EnvPrefix is how the environment is handed to the container.
const EnvPrefix = "APPTAINERENV_"

// Runtime starts containers with apptainer. It is safe for concurrent use.
type Runtime struct {
	binary string
	proc   process.Runtime
}

var _ runtime.Runtime = (*Runtime)(nil)

// Find returns binary when it names one, else apptainer, else
// singularity on $PATH.
func Find(binary string) (string, error) {
	if binary != "" {
		return exec.LookPath(binary)
	}
	for _, cand := range []string{"apptainer", "singularity"} {
		if p, err := exec.LookPath(cand); err == nil {
			return p, nil
		}
	}
	return "", ErrNoApptainer
}

// New returns the driver for binary (empty: see Find).
func New(binary string) (*Runtime, error) {
	bin, err := Find(binary)
	if err != nil {
		return nil, err
	}
	return &Runtime{binary: bin, proc: process.New()}, nil
}

// Name implements runtime.Runtime.
func (r *Runtime) Name() string { return Name }

// Cleanup implements runtime.Runtime: apptainer keeps no state of ours.
func (r *Runtime) Cleanup(context.Context) error { return nil }

// Recover implements runtime.Runtime: apptainer containers run as the
// nodelet's children and are not re-attached to.
func (r *Runtime) Recover(context.Context, string, string) (runtime.Container, error) {
	return nil, fmt.Errorf("recover: %w", runtime.ErrUnsupported)
}

// Start implements runtime.Runtime.
func (r *Runtime) Start(ctx context.Context, s runtime.Spec) (runtime.Container, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Init == "" {
		return nil, fmt.Errorf("%w: apptainer needs the troupe-init binary", runtime.ErrInvalidSpec)
	}
	if s.TTY {
		return nil, fmt.Errorf("interactive terminal: %w (use runc)", runtime.ErrUnsupported)
	}
	img, err := imageArg(s.ImageOrHost())
	if err != nil {
		return nil, err
	}
	p := s
	p.Args = Command(r.binary, s, img)
	p.Env = hostEnv(s.Env)
	p.Mounts, p.NetNS, p.Image, p.Workdir = nil, "", runtime.ImageHost, ""
	c, err := r.proc.Start(ctx, p)
	if err != nil {
		return nil, err
	}
	pid := 0
	if pc, ok := c.(interface{ Pid() int }); ok {
		pid = pc.Pid()
	}
	return &container{Container: c, pid: pid}, nil
}

// imageArg is the image as apptainer names it.
func imageArg(ref string) (string, error) {
	kind, err := image.Detect(ref)
	if err != nil {
		return "", err
	}
	switch kind {
	case image.KindHost:
		return "/", nil
	case image.KindOCILayout:
		return "oci:" + ref, nil
	case image.KindArchive:
		if strings.HasSuffix(ref, ".tar") && !isOCIArchive(ref) {
			return "docker-archive:" + ref, nil
		}
		return "oci-archive:" + ref, nil
	}
	return ref, nil // SIF or sandbox directory
}

func isOCIArchive(path string) bool {
	return strings.Contains(filepath.Base(path), "oci")
}

// Command is the command line that runs s with binary on image img.
func Command(binary string, s runtime.Spec, img string) []string {
	host := s.Hostname
	if host == "" {
		host = s.ID
	}
	args := []string{binary, "exec", "--containall", "--cleanenv", "--uts", "--hostname", host,
		"--home", cmp.Or(s.Home, filepath.Join(s.Dir, "home")) + ":" + runtime.HomeDir,
		"--pwd", s.WorkdirOrHome()}
	binds := append(s.Mounts, runtime.Mount{Source: s.Init, Target: runtime.InitPath, ReadOnly: true})
	for _, m := range binds {
		b := m.Source + ":" + m.Target
		if m.ReadOnly {
			b += ":ro"
		}
		args = append(args, "--bind", b)
	}
	if hasGPU(s.Env) {
		args = append(args, "--nv")
	}
	args = append(args, img, runtime.InitPath)
	args = append(args, s.InitArgs...)
	if len(s.Args) > 0 {
		args = append(append(args, "run", "--"), s.Args...)
	} else {
		args = append(args, "wait")
	}
	if s.NetNS != "" {
		args = append([]string{"nsenter", "--net=" + s.NetNS, "--"}, args...)
	}
	return args
}

func hasGPU(env []string) bool {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "NVIDIA_VISIBLE_DEVICES="); ok && v != "" && v != "void" && v != "none" {
			return true
		}
	}
	return false
}

// hostEnv is apptainer's own environment: the container's as
// APPTAINERENV_ entries, and a PATH to find helpers.
func hostEnv(env []string) []string {
	out := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, kv := range env {
		out = append(out, EnvPrefix+kv)
	}
	return out
}
