package runc

import (
	"fmt"
	"os"
	"path"
	"slices"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// containerView is the tree runc builds for s before its first
// Spec.Mounts entry: root (an image's overlay, else the host image's
// skeleton with hostDirs), /tmp, the home and, unless layered,
// troupe-init, each where the image leads it.
func containerView(s runtime.Spec, l layout, root string, hostDirs []string, layered bool) (*view, error) {
	v := &view{}
	if s.ImageOrHost() != runtime.ImageHost {
		v.add(viewMount{target: "/", host: root, kind: kindOverlay})
		if layered {
			v.layer = s.Layer
		}
	} else {
		v.add(viewMount{target: "/", host: root, kind: kindNode})
		for _, d := range hostDirs {
			v.add(viewMount{target: d, host: d, kind: kindHost})
		}
	}
	// runc mounts /tmp and the home where the image leads them, too.
	tmp, err := v.settle("/tmp", false, false, nil)
	if err != nil {
		return nil, fmt.Errorf("/tmp: %w", err)
	}
	v.add(viewMount{target: tmp, kind: kindEmpty})
	if err := v.addNode(runtime.HomeDir, l.home()); err != nil {
		return nil, err
	}
	if !layered || !s.InitLayered {
		if err := v.addNode(runtime.InitPath, s.Init); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (v *view) add(m viewMount) { v.mounts = append(v.mounts, m) }

// addNode adds a node's mount of host at target, where runc puts it,
// settled there (see settle).
func (v *view) addNode(target, host string) error {
	fi, err := os.Stat(host)
	if err != nil {
		return err
	}
	p, err := v.settle(target, !fi.IsDir(), false, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	v.add(viewMount{target: p, host: host, kind: kindNode})
	return nil
}

// jobTargets returns s.Mounts with each job's target (runtime.Mount.Job)
// resolved in the container's tree and pinned there (see above), or an
// error wrapping runtime.ErrMountTarget naming the mount; root, hostDirs
// and layered are ociSpec's.
func jobTargets(s runtime.Spec, l layout, root string, hostDirs []string, layered bool) ([]runtime.Mount, error) {
	if !slices.ContainsFunc(s.Mounts, func(m runtime.Mount) bool { return m.Job != "" }) {
		return s.Mounts, nil
	}
	v, err := containerView(s, l, root, hostDirs, layered)
	if err != nil {
		return nil, fmt.Errorf("%w: the node's mounts: %w", runtime.ErrMountTarget, err)
	}
	out := slices.Clone(s.Mounts)
	var reserved, inits []string
	for i, m := range out {
		if m.Job == "" {
			if !layered || !m.Layered {
				if err := v.addNode(m.Target, m.Source); err != nil {
					return nil, fmt.Errorf("%w: the node's mounts: %w", runtime.ErrMountTarget, err)
				}
			}
			continue
		}
		if reserved == nil {
			if reserved, err = reservedIn(v); err == nil {
				inits, err = initsIn(v)
			}
			if err != nil {
				return nil, fmt.Errorf("%w: reserved paths: %w", runtime.ErrMountTarget, err)
			}
		}
		refuse := func(err error) error {
			return fmt.Errorf("mount %q: %w: target %s %w", m.Job, runtime.ErrMountTarget, m.Target, err)
		}
		// On the way, only the kernel's file systems end the walk (the
		// view does not show what is in them); the end is checked
		// against every reserved path.
		kernel := func(p string) error {
			if r, ok := runtime.ReservedBy(p, kernelTargets); ok {
				return fmt.Errorf("leads into %s in the container (its symbolic links followed), which is reserved", r)
			}
			return nil
		}
		p, trail, err := v.walk(path.Clean(m.Target), true, kernel)
		if err != nil {
			return nil, refuse(err)
		}
		if r, ok := runtime.ReservedBy(p, reserved); ok {
			how := "which is reserved"
			if !slices.Contains(runtime.ReservedTargets, r) {
				how = "where a reserved path leads, which is reserved"
			}
			return nil, refuse(fmt.Errorf("leads to %s in the container (its symbolic links followed), on or under %s, %s", p, r, how))
		}
		for _, r := range inits {
			if _, above := under(r, p); above {
				return nil, refuse(fmt.Errorf("leads to %s in the container (its symbolic links followed), which holds %s, where the image's links put troupe's own files", p, r))
			}
		}
		fi, err := os.Stat(m.Source)
		if err != nil {
			return nil, fmt.Errorf("mount %q: source: %w", m.Job, err)
		}
		if err := v.pinTrail(trail); err != nil {
			return nil, refuse(err)
		}
		if err := v.pin(p, !fi.IsDir()); err != nil {
			return nil, refuse(err)
		}
		out[i].Target = p
		v.add(viewMount{target: p, host: m.Source, kind: kindJob, job: m.Job})
	}
	return out, nil
}

// kernelTargets are the reserved paths of the kernel's file systems.
var kernelTargets = []string{"/proc", "/sys", "/dev"}

// reservedIn is runtime.ReservedTargets and where each leads in v. They
// need not be settled: the node's own targets are (addNode), and so are
// /.troupe and troupe-init (initsIn); were the image to lead /proc,
// /sys or /dev elsewhere after this, a job's mount would land in the
// container's own view only (runc refuses proc and sysfs on a link).
func reservedIn(v *view) ([]string, error) {
	out := slices.Clone(runtime.ReservedTargets)
	for _, r := range runtime.ReservedTargets {
		p, err := v.resolve(r, false, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r, err)
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// initsIn is where /.troupe and troupe-init lead in v, settled there
// (runc resolves InitPath again to exec it): no job may mount on them,
// under them or above them (above /.troupe itself is only "/", but an
// image without the layer may lead them elsewhere, under a directory a
// job could cover after runc mounted troupe-init there).
func initsIn(v *view) ([]string, error) {
	var out []string
	for _, r := range []string{path.Dir(path.Dir(runtime.InitPath)), runtime.InitPath} {
		p, err := v.settle(r, r == runtime.InitPath, false, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r, err)
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}
