package devhosts

import (
	"os"
	"os/user"
	"strconv"
	"strings"
)

// MountRoots are the host directories job mounts may come from on a node
// whose config names none (a dev cluster on a workstation): /tmp and the
// home of the user who started it. That user is SUDO_USER under sudo,
// else the login user the kernel keeps for the session (its loginuid,
// which su and sudo -i keep), else the process's own user; root's home
// is added only when root is that user.
func MountRoots() []string {
	roots := []string{"/tmp"}
	if h := invokerHome(); h != "" && h != "/" {
		roots = append(roots, h)
	}
	return roots
}

func invokerHome() string {
	if name := os.Getenv("SUDO_USER"); name != "" {
		if u, err := user.Lookup(name); err == nil && u.HomeDir != "" {
			return u.HomeDir
		}
	}
	if b, err := os.ReadFile("/proc/self/loginuid"); err == nil {
		// 4294967295: no login (a daemon, a container); 0: root logged in.
		if id := strings.TrimSpace(string(b)); id != "4294967295" && id != "0" && id != strconv.Itoa(os.Getuid()) {
			if u, err := user.LookupId(id); err == nil && u.HomeDir != "" {
				return u.HomeDir
			}
		}
	}
	h, _ := os.UserHomeDir()
	return h
}
