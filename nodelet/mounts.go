package nodelet

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/nodelet/devhosts"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// ErrMountRefused: a job's mount block names a source this node does not
// allow, or a target it cannot honour.
var ErrMountRefused = errors.New("mount refused")

// DevMountRoots are the roots a node allows when its config names none:
// /tmp and the invoking user's home (devhosts.MountRoots), what a dev
// cluster on a workstation needs.
func DevMountRoots() []string { return devhosts.MountRoots() }

// checkMounts checks the job's mounts against the allowed roots, before
// anything of the container exists, by their names alone: a source must
// be an absolute path with no ".." component that lies under an allowed
// root (as the root's real path: symlinks in the source are refused when
// it is opened). openUserPaths then opens each source as the job's user,
// through no symlink, and the opened file is what gets mounted.
func checkMounts(ms []api.Mount, roots []string) ([]runtime.Mount, []string, error) {
	var resolved []string
	for _, r := range roots {
		if rr, err := filepath.EvalSymlinks(r); err == nil {
			resolved = append(resolved, rr)
		}
	}
	var (
		out   []runtime.Mount
		names []string
	)
	for _, m := range ms {
		src, err := checkMount(m, resolved)
		if err != nil {
			return nil, nil, fmt.Errorf("mount %q: %w", m.Name, err)
		}
		out = append(out, runtime.Mount{Source: src, Target: filepath.Clean(m.Target), ReadOnly: m.ReadOnly, Job: m.Name})
		names = append(names, m.Name)
	}
	return out, names, nil
}

func checkMount(m api.Mount, roots []string) (string, error) {
	refuse := func(format string, a ...any) (string, error) {
		return "", fmt.Errorf("%w: %s", ErrMountRefused, fmt.Sprintf(format, a...))
	}
	for _, p := range []string{m.Source, m.Target} {
		if !filepath.IsAbs(p) {
			return refuse("%q is not an absolute path", p)
		}
		if slices.Contains(strings.Split(p, "/"), "..") {
			return refuse("%q contains \"..\"", p)
		}
	}
	// By name only here: the runtime resolves the target inside the
	// container's root, through the image's symbolic links, and refuses
	// it again where it leads (runtime.Mount.Job).
	target := filepath.Clean(m.Target)
	if _, ok := runtime.ReservedBy(target, runtime.ReservedTargets); ok {
		return refuse("target %s is reserved", target)
	}
	src := filepath.Clean(m.Source)
	for _, r := range roots {
		if src == r || strings.HasPrefix(src, r+"/") || r == "/" {
			return src, nil
		}
	}
	return refuse("source %s is outside the allowed roots (%s)", m.Source, strings.Join(roots, ", "))
}
