package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestDevSocketReachableByOthers (issue 12 item 9): root starts schedd
// --dev on a data dir of mode 0700 (as mktemp -d makes it); uid 65534
// runs bqueue against its socket, which lives in that dir, and gets the
// queue rather than "permission denied".
func TestDevSocketReachableByOthers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root to run bqueue as uid 65534")
	}
	base := t.TempDir()
	for d := base; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		_ = os.Chmod(d, 0o755) // up to the data dir, the path is open
	}
	data := filepath.Join(base, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	_, addr := startScheddArgs(t, data, "--nodes", "1", "--node-cpu", "1", "--node-memory", "1GiB")
	cmd := exec.Command(bin+"/bqueue", "-u", "all")
	cmd.Env = append(os.Environ(), "TROUPE_ADDR="+addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bqueue as uid 65534 against %s: %v\n%s", addr, err, out)
	}
}
