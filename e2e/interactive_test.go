package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// ptyRun is a troupe command running on a pseudo-terminal, as a user at
// a terminal would run it.
type ptyRun struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{} // closed when the command has exited
	read chan struct{} // closed when the terminal has nothing more to read
	code int
}

// startPTY runs bin/name args in dir on a rows×cols terminal, as uid
// (-1: this process's).
func (c *devCluster) startPTY(t *testing.T, dir string, rows, cols uint16, uid int, name string, args ...string) *ptyRun {
	t.Helper()
	cmd := exec.Command(bin+"/"+name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TROUPE_ADDR="+c.addr, "TERM=dumb")
	if uid >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: rows, Cols: cols})
	if err != nil {
		t.Fatalf("%s on a terminal: %v", name, err)
	}
	p := &ptyRun{t: t, cmd: cmd, tty: tty, done: make(chan struct{}), read: make(chan struct{})}
	go func() {
		defer close(p.read)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				break
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		tty.Close()
	})
	return p
}

func (p *ptyRun) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// expect waits until the terminal has shown want.
func (p *ptyRun) expect(want string, timeout time.Duration) {
	p.t.Helper()
	exited := false
	shown := func() bool { return strings.Contains(p.output(), want) }
	waitFor(timeout, func() bool {
		select {
		case <-p.done:
			exited = true
			select { // the last output, read to the end
			case <-p.read:
			case <-time.After(2 * time.Second):
			}
		default:
		}
		return shown() || exited
	})
	if !shown() {
		p.t.Fatalf("the terminal did not show %q within %s (exited: %v); it shows:\n%s", want, timeout, exited, p.output())
	}
}

func (p *ptyRun) typeLine(s string) {
	p.t.Helper()
	if _, err := io.WriteString(p.tty, s); err != nil {
		p.t.Fatalf("typing %q: %v", s, err)
	}
}

// wait waits for the command to exit and returns its status.
func (p *ptyRun) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		// What it wrote last ("Detached…") may still be in the terminal:
		// read it to the end (EIO once no process holds the other side).
		select {
		case <-p.read:
		case <-time.After(2 * time.Second):
		}
		return p.code
	case <-time.After(timeout):
		p.t.Fatalf("%s still running after %s; the terminal shows:\n%s", p.cmd.Path, timeout, p.output())
		return -1
	}
}

// TestInteractive drives `bsub -I` through a real pseudo-terminal: a
// login shell in main1 of a two-node runc session, on a terminal of the
// submitter's size, that reaches sub1 by ssh; its exit status is bsub's.
// Then battach: another user is refused, the owner detaches with Ctrl-]
// and comes back.
func TestInteractive(t *testing.T) {
	needRunc(t)
	c := startCluster(t, 2, "1")
	defer c.stop()
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		_ = os.Chmod(d, 0o755) // battach runs as another user there too
	}
	job := filepath.Join(dir, "dev.hcl")
	if err := os.WriteFile(job, []byte(`job "dev" {
  cluster {
    size = 2
    mode = "multi-node"
  }
  resources {
    cpu    = 1
    memory = "256MiB"
  }
  image = "host"
}
`), 0o644); err != nil {
		t.Fatal(err)
	}

	p := c.startPTY(t, dir, 33, 111, -1, "bsub", "-I", job)
	p.expect("<<Starting on ", time.Minute)
	p.typeLine("test -t 0 && echo remote-is-a-tty; stty size; echo marker-$((6*7)) $(hostname); ssh sub1 hostname; exit 3\n")
	if code := p.wait(time.Minute); code != 3 {
		t.Fatalf("bsub -I exit = %d, want the shell's 3; terminal:\n%s", code, p.output())
	}
	out := p.output()
	for _, want := range []string{"<<Waiting for dispatch ...>>", "remote-is-a-tty", "33 111", "marker-42 main1", "\nsub1"} {
		if !strings.Contains(strings.ReplaceAll(out, "\r", ""), want) {
			t.Errorf("bsub -I terminal lacks %q:\n%s", want, out)
		}
	}
	m := submitted.FindStringSubmatch(strings.TrimLeft(out, "\r\n"))
	if m == nil {
		t.Fatalf("bsub -I did not name its job:\n%s", out)
	}
	id, _ := strconv.ParseUint(m[1], 10, 64)
	if j := c.waitState(id, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() }); j.State != api.JobFailed || j.ExitCode != 3 {
		t.Errorf("job %d ended %s with exit code %d, want FAILED 3", id, j.State, j.ExitCode)
	}
	// The transcript is the job's output, as bpeek shows it.
	if peek, _, _ := c.run(dir, "bpeek", strconv.FormatUint(id, 10)); !strings.Contains(peek, "marker-42") {
		t.Errorf("bpeek of the interactive job lacks its transcript: %q", peek)
	}

	// A command instead of a shell; battach comes to it later.
	p = c.startPTY(t, dir, 24, 80, -1, "bsub", "-I", job, "--", "sh", "-c", `echo ready; read line; echo "line=$line"; exit 0`)
	p.expect("ready", time.Minute)
	m = submitted.FindStringSubmatch(strings.TrimLeft(p.output(), "\r\n"))
	if m == nil {
		t.Fatalf("bsub -I did not name its job:\n%s", p.output())
	}
	jid := m[1]
	p.typeLine("\x1d") // Ctrl-]: detach, the job goes on
	if code := p.wait(30 * time.Second); code != 0 || !strings.Contains(p.output(), "Detached") {
		t.Fatalf("detaching: exit %d, terminal:\n%s", code, p.output())
	}
	other := c.startPTY(t, dir, 24, 80, 65534, "battach", jid)
	if code := other.wait(30 * time.Second); code == 0 || !strings.Contains(other.output(), "permission denied") {
		t.Fatalf("battach as uid 65534: exit %d, want a refusal; terminal:\n%s", code, other.output())
	}
	if strings.Contains(other.output(), "ready") {
		t.Errorf("the refused battach showed the job's terminal:\n%s", other.output())
	}
	back := c.startPTY(t, dir, 24, 80, -1, "battach", jid)
	back.expect("ready", 30*time.Second) // the recent output, replayed
	back.typeLine("hello\n")
	if code := back.wait(30 * time.Second); code != 0 {
		t.Fatalf("battach exit = %d, want 0; terminal:\n%s", code, back.output())
	}
	back.expect("line=hello", time.Second)
}

// BenchmarkAttach measures an interactive job's terminal (bsub -I): the
// time from submit until the terminal answers (ms/open: the job is
// placed, main1 starts and the stream is joined through schedd and the
// nodelet), and then a keystroke's round trip, client → schedd → nodelet
// → troupe-init → the terminal's echo and back (µs/keystroke, over 200
// keystrokes per job).
//
//	sudo go test ./e2e -run '^$' -bench Attach -benchtime 5x
func BenchmarkAttach(b *testing.B) {
	needRunc(b)
	c := startCluster(b, 1, "2")
	defer c.stop()
	cli, err := client.New(c.addr)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	spec := jobspec.Job{
		Name: "attach", Image: "host", Command: []string{"cat"},
		Cluster:   jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
		Resources: jobspec.Resources{CPU: 1, Memory: 128 << 20},
		Output:    filepath.Join(dir, "attach-%j.out"),
	}
	ctx := context.Background()
	const keys = 200
	var open, rtt time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := cli.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec), Cwd: dir, User: "root", Interactive: true})
		if err != nil {
			b.Fatal(err)
		}
		var stream io.ReadWriteCloser
		for {
			if stream, err = cli.Attach(ctx, res.JobID, ""); err == nil {
				break
			}
			if time.Since(t0) > 30*time.Second {
				b.Fatalf("job %d: no terminal after 30s: %v", res.JobID, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		watchdog := time.AfterFunc(time.Minute, func() { stream.Close() }) // a lost echo fails, not hangs
		fr := attach.NewReader(stream)
		echo := func(p string) {
			if err := attach.WriteData(stream, []byte(p)); err != nil {
				b.Fatal(err)
			}
			for got := ""; !strings.Contains(got, p); {
				f, err := fr.Next()
				if err != nil {
					b.Fatalf("job %d: %v", res.JobID, err)
				}
				got += string(f.Payload)
			}
		}
		if err := attach.WriteWindow(stream, 24, 80); err != nil {
			b.Fatal(err)
		}
		echo("ready")
		open += time.Since(t0)
		t1 := time.Now()
		for k := 0; k < keys; k++ {
			echo(string(rune('a' + k%26)))
		}
		rtt += time.Since(t1)
		_ = attach.WriteData(stream, []byte("\n\x04"))
		for {
			f, err := fr.Next()
			if err != nil || f.Type == attach.Exit {
				break
			}
		}
		watchdog.Stop()
		stream.Close()
		c.waitState(res.JobID, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() })
	}
	b.StopTimer()
	b.ReportMetric(float64(open.Milliseconds())/float64(b.N), "ms/open")
	b.ReportMetric(float64(rtt.Microseconds())/float64(b.N*keys), "µs/keystroke")
}
