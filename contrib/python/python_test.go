// Package python tests the Python client in this directory (troupe/)
// against a real schedd: `schedd --dev` with one nodelet of the process
// runtime, built from this tree, serving its unix socket and https (a
// self-signed certificate), and python3 -m unittest of tests/.
package python

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/freeport"
)

func TestPythonClient(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("SKIP: the Python client's tests need python3 (`make deps` installs it)")
	}
	if testing.Short() {
		t.Skip("SKIP: -short: builds schedd and nodelet and starts a dev cluster")
	}
	bin := buildBins(t)

	data, err := os.MkdirTemp("", "troupe-py")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(data)
	_ = os.Chmod(data, 0o755) // the socket is there
	var log syncBuffer
	tcp := freeport.Addr(t)
	schedd := exec.Command(bin+"/schedd", "--dev", "--data-dir", data, "--listen", tcp, "--nodes", "1", "--node-cpu", "2",
		"--node-memory", "2GiB", "--runtime", "process", "--dev-hosts", "shared", "--stop-grace", "1s")
	schedd.Stderr = &log
	out, err := schedd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := schedd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = schedd.Wait(); close(done) }()
	defer func() {
		_ = schedd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = schedd.Process.Kill()
			t.Errorf("schedd --dev did not stop within 60s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("schedd log:\n%s", log.String())
		}
	}()
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "export TROUPE_ADDR="); ok {
				addrs <- v
			}
		}
	}()
	var addr string
	select {
	case addr = <-addrs:
	case <-done:
		t.Fatalf("schedd --dev exited:\n%s", log.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("schedd --dev did not print TROUPE_ADDR in 90s:\n%s", log.String())
	}

	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-m", "unittest", "discover", "-v", "-s", "tests")
	cmd.Env = append(os.Environ(), "TROUPE_ADDR="+addr, "PYTHONPATH="+here,
		"TROUPE_TEST_HTTPS=https://"+tcp, "TROUPE_TEST_CA="+filepath.Join(data, "tls", "cert.pem"), "PYTHONDONTWRITEBYTECODE=1", "TROUPE_TOKEN=")
	res, err := cmd.CombinedOutput()
	t.Logf("python3 -m unittest (TROUPE_ADDR=%s):\n%s", addr, res)
	if err != nil {
		t.Fatalf("the Python client's tests failed: %v", err)
	}
	if bytes.Contains(res, []byte("skipped 'needs")) {
		t.Fatal("the server tests were skipped: TROUPE_ADDR did not reach them")
	}
}

// bins is where buildBins put the binaries, once for the package.
var bins struct {
	once sync.Once
	dir  string
	err  error
}

// buildBins builds schedd, nodelet and their helpers from this tree, once
// for all the tests of the package, and returns their directory.
func buildBins(t *testing.T) string {
	t.Helper()
	bins.once.Do(func() {
		dir, err := os.MkdirTemp("", "troupe-py-bin")
		if err != nil {
			bins.err = err
			return
		}
		build := exec.Command("go", "build", "-o", dir+"/", "../../cmd/schedd", "../../cmd/nodelet", "../../cmd/troupe-init", "../../cmd/troupe-ssh", "../../cmd/troupe-fence")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			bins.err = fmt.Errorf("building schedd and nodelet: %w\n%s", err, out)
		}
		bins.dir = dir
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
	return bins.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bins.dir != "" {
		_ = os.RemoveAll(bins.dir)
	}
	os.Exit(code)
}

// syncBuffer is a bytes.Buffer that schedd's stderr and the test may
// use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
