package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/attach"
)

// asUser runs f with this process's effective uid and gid set to u's,
// then sets them back to root's (the saved ids stay root's). Unix-socket
// connections made meanwhile carry u's credentials (SO_PEERCRED records
// the connecting process's effective ids), so schedd sees u as their
// caller. f must not start processes or write files.
func asUser(t *testing.T, u e2eUser, f func()) {
	t.Helper()
	if err := syscall.Setresgid(-1, int(u.gid), -1); err != nil {
		t.Fatalf("setresgid %d: %v", u.gid, err)
	}
	if err := syscall.Setresuid(-1, int(u.uid), -1); err != nil {
		_ = syscall.Setresgid(-1, 0, -1)
		t.Fatalf("setresuid %d: %v", u.uid, err)
	}
	defer func() {
		if err := syscall.Setresuid(-1, 0, -1); err != nil {
			panic(fmt.Sprintf("setting the effective uid back to root: %v", err))
		}
		if err := syscall.Setresgid(-1, 0, -1); err != nil {
			panic(fmt.Sprintf("setting the effective gid back to root: %v", err))
		}
	}()
	f()
}

// openFiles counts the descriptors process pid has open.
func openFiles(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestStreamFloodKeepsNodes: one user (nobody) floods schedd, its limit
// of open files lowered to some 200 above what it holds, with terminal
// (attach) and /apps streams on an interactive job of theirs, far past
// the cap per job, and with hundreds of idle connections besides, held
// for three node timeouts. The streams past the cap are refused with
// 429 naming it; schedd closes the idle connections to keep its reserve
// of open files for the nodes; no node misses its heartbeats, and
// another user's running job goes on untouched (no lease runs out, no
// fence kills it).
func TestStreamFloodKeepsNodes(t *testing.T) {
	needRunc(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("SKIP: needs /usr/bin/python3 (the flooded job's service, in the host image)")
	}
	const nodeTimeout = 6 * time.Second
	// One node: alice's job runs beside bob's, as on a shared node.
	c := startCluster(t, 1, "2", "--node-timeout", nodeTimeout.String())
	alice := aliceUser(t)
	bob := nobodyUser

	// alice's batch job.
	adir := dirOf(t, alice, 0o755, searchable(t), "alice")
	aliceJob, _ := c.submitAs(alice.uid, alice.gid, adir, "steady", `job "steady" {
  image = "host"
  command = ["sh", "-c", "while :; do date +%s >>steady.log; sleep 0.2; done"]
  resources {
    cpu    = 1
    memory = "128MiB"
  }
}`)
	c.waitState(aliceJob, 60*time.Second, func(j api.Job) bool { return j.State == api.JobRunning })

	// bob's interactive job: a shell command on a terminal, and a
	// service that answers an Upgrade and echoes.
	bdir := dirOf(t, bob, 0o755, searchable(t), "bob")
	if err := os.WriteFile(filepath.Join(bdir, "echo.py"), []byte(echoPy), 0o644); err != nil {
		t.Fatal(err)
	}
	jobFile := filepath.Join(bdir, "flood.hcl")
	if err := os.WriteFile(jobFile, []byte(fmt.Sprintf(`job "flood" {
  image   = "host"
  command = ["/usr/bin/python3", "/home/work/site/echo.py"]
  mount "site" {
    source   = %q
    target   = "/home/work/site"
    readonly = true
  }
  resources {
    cpu    = 1
    memory = "128MiB"
  }
  service "echo" {
    port = 8001
  }
}`, bdir)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := c.startPTY(t, bdir, 24, 80, int(bob.uid), "bsub", "-I", jobFile)
	p.expect("<<Starting on ", time.Minute)
	m := submitted.FindStringSubmatch(strings.TrimLeft(p.output(), "\r\n"))
	if m == nil {
		t.Fatalf("bsub -I did not name its job:\n%s", p.output())
	}
	bobJob, _ := strconv.ParseUint(m[1], 10, 64)
	p.typeLine("\x1d") // detach: the job goes on
	if code := p.wait(30 * time.Second); code != 0 {
		t.Fatalf("detaching from bob's job: exit %d:\n%s", code, p.output())
	}
	before := c.job(aliceJob)

	// The service answers (python has started) before the flood.
	sock := strings.TrimPrefix(c.addr, "unix://")
	appReq := fmt.Sprintf("GET /apps/%d/echo/ HTTP/1.1\r\nHost: troupe\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", bobJob)
	if !waitFor(30*time.Second, func() bool {
		cn, err := net.Dial("unix", sock)
		if err != nil {
			return false
		}
		defer cn.Close()
		_ = cn.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = cn.Write([]byte(appReq))
		resp, err := http.ReadResponse(bufio.NewReader(cn), nil)
		return err == nil && resp.StatusCode == http.StatusSwitchingProtocols
	}) {
		t.Fatal("bob's service did not answer through /apps within 30s")
	}

	// schedd's limit of open files: some 200 above what it holds now.
	pid := c.cmd.Process.Pid
	var orig unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &orig); err != nil {
		t.Fatal(err)
	}
	// The soft limit alone: lowering the hard one could not be undone
	// without CAP_SYS_RESOURCE.
	limit := uint64(openFiles(t, pid) + 200)
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: orig.Max}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Prlimit(pid, unix.RLIMIT_NOFILE, &orig, nil) })
	t.Logf("schedd's limit of open files lowered to %d", limit)

	// The flood, all as bob over the socket.
	var (
		mu        sync.Mutex
		conns     []net.Conn
		upgraded  atomic.Int64
		capped    atomic.Int64
		otherCode = map[int]int{}
		capMsg    string
		otherMsg  string
	)
	keep := func(cn net.Conn) {
		mu.Lock()
		conns = append(conns, cn)
		mu.Unlock()
	}
	// stream opens one terminal or app stream and keeps it open.
	stream := func(req string, wg *sync.WaitGroup) {
		defer wg.Done()
		cn, err := net.Dial("unix", sock)
		if err != nil {
			return
		}
		keep(cn)
		_ = cn.SetReadDeadline(time.Now().Add(3 * nodeTimeout))
		_, _ = cn.Write([]byte(req))
		resp, err := http.ReadResponse(bufio.NewReader(cn), nil)
		if err != nil {
			return
		}
		switch resp.StatusCode {
		case http.StatusSwitchingProtocols:
			upgraded.Add(1)
		case http.StatusTooManyRequests:
			capped.Add(1)
			b := make([]byte, 512)
			n, _ := resp.Body.Read(b)
			mu.Lock()
			capMsg = string(b[:n])
			mu.Unlock()
		default:
			b := make([]byte, 512)
			n, _ := resp.Body.Read(b)
			mu.Lock()
			otherCode[resp.StatusCode]++
			otherMsg = string(b[:n])
			mu.Unlock()
		}
	}
	attachReq := fmt.Sprintf("POST /v1/jobs/%d/attach HTTP/1.1\r\nHost: troupe\r\nConnection: Upgrade\r\nUpgrade: %s\r\nContent-Length: 0\r\n\r\n", bobJob, attach.Upgrade)
	const attaches, apps, idle = 60, 20, 400
	start := time.Now()
	asUser(t, bob, func() {
		var wg sync.WaitGroup
		for i := range attaches + apps {
			wg.Add(1)
			req := attachReq
			if i >= attaches {
				req = appReq
			}
			go stream(req, &wg)
		}
		wg.Wait()
		// Idle connections, dialed again as schedd closes them, for
		// three node timeouts.
		idleConns := make([]net.Conn, idle)
		for time.Since(start) < 3*nodeTimeout {
			for i, cn := range idleConns {
				if cn != nil {
					_ = cn.SetReadDeadline(time.Now().Add(time.Millisecond))
					if _, err := cn.Read(make([]byte, 1)); err == nil || !os.IsTimeout(err) {
						cn.Close() // closed by schedd
						idleConns[i] = nil
					}
				}
				if idleConns[i] == nil {
					if cn, err := net.Dial("unix", sock); err == nil {
						idleConns[i] = cn
						keep(cn)
					}
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	mu.Lock()
	for _, cn := range conns {
		cn.Close()
	}
	t.Logf("flood: %d streams upgraded, %d refused 429, other answers %v (last: %q); %d connections dialed in all", upgraded.Load(), capped.Load(), otherCode, otherMsg, len(conns))
	mu.Unlock()
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &orig, nil); err != nil {
		t.Fatal(err)
	}

	if capped.Load() == 0 || !strings.Contains(capMsg, "--max-streams-per-job") {
		t.Errorf("no stream refused with 429 naming --max-streams-per-job (last: %q)", capMsg)
	}
	if n := upgraded.Load(); n > 32 {
		t.Errorf("%d of bob's streams on one job were upgraded, past the cap of 32", n)
	}
	after := c.job(aliceJob)
	if after.State != api.JobRunning || after.Requeues != before.Requeues {
		t.Errorf("alice's job after the flood: %s (%s), requeues %d, want RUNNING as before (%d)", after.State, after.Reason, after.Requeues, before.Requeues)
	}
	out, _, _ := c.run(c.dir, "bhosts")
	if strings.Contains(out, "unavail") || strings.Contains(out, "DOWN") {
		t.Errorf("a node is down after the flood:\n%s", out)
	}
	log := c.log.String()
	for _, bad := range []string{"marking them DOWN", "no lease from schedd", "killed by the node's fence"} {
		if strings.Contains(log, bad) {
			t.Errorf("schedd's log says %q during the flood", bad)
		}
	}
	if !strings.Contains(log, "closed idle user connections") {
		t.Errorf("schedd never came near its limit of open files (no idle connection closed): the flood did not test the reserve")
	}
}
