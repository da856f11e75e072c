package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/accounting"
	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/internal/freeport"
)

// benchBinaries returns the directory holding schedd and troupe-nodesim:
// $BENCH_BIN when set (prebuilt, for a machine without Go), else dir,
// where they are built from this tree.
func benchBinaries(b *testing.B, dir string) string {
	if bin := os.Getenv("BENCH_BIN"); bin != "" {
		for _, name := range []string{"schedd", "troupe-nodesim"} {
			fi, err := os.Stat(filepath.Join(bin, name))
			if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				b.Fatalf("$BENCH_BIN=%s: no executable %s there (contrib/dev/bench-scale-remote build makes both)", bin, name)
			}
		}
		return bin
	}
	build := exec.Command("go", "build", "-o", dir+"/", "github.com/troupe-hpc/troupe/cmd/schedd", "github.com/troupe-hpc/troupe/cmd/troupe-nodesim")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building schedd and troupe-nodesim (set $BENCH_BIN to a directory of prebuilt ones on a machine without Go): %v\n%s", err, out)
	}
	return dir
}

// benchPeer is one schedd process of the benchmark.
type benchPeer struct {
	proc
	name    string
	data    string // its --data-dir
	metrics string // host:port of its /metrics
}

// benchCluster is what the benchmark runs against: one schedd, on its
// unix socket, or the raft peers of an HA schedd over https, as nodelets
// and users on other machines reach them.
type benchCluster struct {
	peers  []benchPeer
	client *client.Client
	// simArgs tell troupe-nodesim where schedd is and how to register.
	simArgs []string
}

// startCluster starts n schedd peers with args besides their own, in
// dir, and waits until one leads. n == 1 is a lone schedd on its unix
// socket; with more they are raft peers serving https on loopback, with
// a self-signed certificate and a join token, and the client and
// troupe-nodesim are given the list of all of them (a follower sends them
// to the leader). store, when not "", is an accounting store to start
// each peer with (every peer keeps its own SQLite store).
func startCluster(b *testing.B, log *os.File, bin, dir string, n int, store string, args ...string) *benchCluster {
	c := &benchCluster{}
	var cert, key, join string
	var peers, rafts, apis []string
	if n > 1 {
		var err error
		if cert, key, err = auth.SelfSigned(filepath.Join(dir, "tls"), nil); err != nil {
			b.Fatal(err)
		}
		join = filepath.Join(dir, "join-token")
		if _, err := auth.JoinToken(join); err != nil {
			b.Fatal(err)
		}
		for i := range n {
			rafts, apis = append(rafts, freeport.Addr(b)), append(apis, freeport.Addr(b))
			peers = append(peers, fmt.Sprintf("s%d=%s", i+1, rafts[i]))
		}
	}
	var lines []<-chan string
	for i := range n {
		p := benchPeer{name: fmt.Sprintf("s%d", i+1), data: filepath.Join(dir, fmt.Sprintf("s%d", i+1)), metrics: freeport.Addr(b)}
		if err := os.MkdirAll(p.data, 0o700); err != nil {
			b.Fatal(err)
		}
		if store != "" {
			copyFile(b, store, filepath.Join(p.data, accounting.FileName))
		}
		pargs := append([]string{"--data-dir", p.data, "--socket", filepath.Join(p.data, "schedd.sock"),
			"--metrics-addr", p.metrics}, args...)
		if n > 1 {
			pargs = append(pargs, "--listen", apis[i], "--tls-cert", cert, "--tls-key", key, "--join-token-file", join,
				"--raft-addr", rafts[i], "--peers", strings.Join(peers, ","))
		}
		cmd, l := startProc(b, log, filepath.Join(bin, "schedd"), pargs...)
		p.proc = proc{cmd.Process.Pid}
		c.peers = append(c.peers, p)
		lines = append(lines, l)
	}
	var socks []string
	for _, l := range lines {
		socks = append(socks, waitLine(b, l, "export TROUPE_ADDR=", time.Minute))
	}
	ctx := context.Background()
	if n == 1 {
		cl, err := client.New(socks[0])
		if err != nil {
			b.Fatal(err)
		}
		c.client, c.simArgs = cl, []string{"--addr", socks[0]}
		c.client.SetTimeout(5 * time.Minute)
		return c
	}
	// The leader's socket issues an admin token; followers refuse.
	secret := eventually.Value(b, time.Minute, fmt.Sprintf("a leader among the %d schedd peers issuing the admin token", n), func() (string, bool) {
		for _, s := range socks {
			sc, err := client.New(s)
			if err != nil {
				b.Fatal(err)
			}
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			tok, err := sc.CreateToken(cctx, api.TokenCreate{User: "root", Admin: true})
			cancel()
			if err == nil {
				return tok.Secret, true
			}
		}
		return "", false
	})
	var urls []string
	for _, a := range apis {
		urls = append(urls, "https://"+a)
	}
	list := strings.Join(urls, ",")
	cl, err := client.NewWith(list, client.Options{CA: cert, Token: secret})
	if err != nil {
		b.Fatal(err)
	}
	cl.SetTimeout(5 * time.Minute)
	c.client, c.simArgs = cl, []string{"--addr", list, "--ca", cert, "--join-token-file", join}
	return c
}

func copyFile(b *testing.B, from, to string) {
	in, err := os.Open(from)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
}

// scrape reads the metrics without labels from a schedd's /metrics.
func scrape(addr string) (map[string]float64, error) {
	hc := http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET http://%s/metrics: %s", addr, resp.Status)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || strings.HasPrefix(f[0], "#") || strings.Contains(f[0], "{") {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			m[f[0]] = v
		}
	}
	return m, sc.Err()
}

// leader is the index of the peer that says it leads, -1 if none does.
func (c *benchCluster) leader() int {
	for i, p := range c.peers {
		if m, err := scrape(p.metrics); err == nil && m["troupe_schedd_raft_is_leader"] == 1 {
			return i
		}
	}
	return -1
}

// passes is the leader's count of scheduling passes so far and the time
// they took (snapshot to plan), from its metrics.
func (c *benchCluster) passes(b *testing.B, leader int) (int, time.Duration) {
	m, err := scrape(c.peers[leader].metrics)
	if err != nil {
		b.Fatalf("reading schedd's metrics: %v", err)
	}
	const name = "troupe_schedd_scheduling_pass_duration_seconds"
	return int(m[name+"_count"]), time.Duration(m[name+"_sum"] * float64(time.Second))
}

// heap is the leader's Go heap from its metrics: in use now, and the
// live heap at its last collection (the next goal over 1 + GOGC/100).
func (c *benchCluster) heap(b *testing.B, leader int) (inuse, live int64) {
	m, err := scrape(c.peers[leader].metrics)
	if err != nil {
		b.Fatalf("reading schedd's metrics: %v", err)
	}
	gogc := m["go_gc_gogc_percent"]
	if gogc <= 0 {
		gogc = 100
	}
	return int64(m["go_memstats_heap_inuse_bytes"]), int64(m["go_memstats_next_gc_bytes"] / (1 + gogc/100))
}
