package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// toolAsNobody runs a user's own tool (Rscript, snakemake…) in dir as
// nobody, as on a login node: links first on PATH when given (troupe's
// Slurm commands), then troupe's binaries and the system's; HOME and
// XDG_CACHE_HOME in dir; TROUPE_ADDR the cluster's. It returns the tool's
// combined output once it exits, killing it after limit.
func (c *devCluster) toolAsNobody(t *testing.T, limit time.Duration, dir, links, tool string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	path := bin + ":/usr/local/bin:/usr/bin:/bin"
	if links != "" {
		path = links + ":" + path
	}
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + path, "TROUPE_ADDR=" + c.addr, "USER=nobody",
		"HOME=" + dir, "XDG_CACHE_HOME=" + filepath.Join(dir, ".cache"), "LANG=C.UTF-8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyUser.uid, Gid: nobodyUser.gid}}
	return cmd.CombinedOutput()
}
