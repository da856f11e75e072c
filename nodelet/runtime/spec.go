package runtime

import (
	"fmt"
	"path/filepath"
	"regexp"
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// Validate checks what every driver needs of a Spec. Errors wrap
// ErrInvalidSpec.
func (s Spec) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidSpec, fmt.Sprintf(format, a...))
	}
	switch {
	case !idPattern.MatchString(s.ID):
		return bad("id %q: want letters, digits, '-', '_', '.'", s.ID)
	case s.Dir == "" || !filepath.IsAbs(s.Dir):
		return bad("dir %q: want an absolute path", s.Dir)
	case s.Image != "" && s.Image != ImageHost && !filepath.IsAbs(s.Image):
		return bad("image %q: want %q or an absolute rootfs directory", s.Image, ImageHost)
	case s.Workdir != "" && !filepath.IsAbs(s.Workdir):
		return bad("workdir %q: want an absolute path", s.Workdir)
	case s.CPU < 0 || s.Memory < 0:
		return bad("negative resource limit")
	case len(s.Args) == 0 && s.Init == "":
		return bad("no command and no init binary to wait with")
	}
	for _, m := range s.Mounts {
		if !filepath.IsAbs(m.Source) || !filepath.IsAbs(m.Target) {
			return bad("mount %s:%s: want absolute paths", m.Source, m.Target)
		}
	}
	return nil
}

// ImageOrHost is Image, or ImageHost when empty.
func (s Spec) ImageOrHost() string {
	if s.Image == "" {
		return ImageHost
	}
	return s.Image
}

// WorkdirOrHome is Workdir, or HomeDir when empty.
func (s Spec) WorkdirOrHome() string {
	if s.Workdir == "" {
		return HomeDir
	}
	return s.Workdir
}
