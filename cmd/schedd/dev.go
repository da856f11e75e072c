package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/troupe-hpc/troupe/nodelet/devhosts"
	"github.com/troupe-hpc/troupe/nodelet/sshkey"
	"github.com/troupe-hpc/troupe/sched"
)

// devCluster is the nodelet processes of `schedd --dev`.
type devCluster struct {
	procs []*exec.Cmd
	done  []chan struct{}
	log   *slog.Logger
	hosts *devhosts.Hosts // nil: nodelets share this machine's network
}

// useNetnsHosts decides where dev nodelets run (--dev-hosts): "netns"
// puts each in its own test host (package devhosts: a network namespace
// on an underlay bridge, its own address), so multi-node sessions cross a
// real VXLAN overlay as on separate machines; "shared" runs them all in
// this machine's network, where only one-node sessions get a private
// network; "auto" is netns when root with runc, else shared.
func useNetnsHosts(o options) bool {
	switch o.devHosts {
	case "netns":
		return true
	case "shared":
		return false
	}
	if os.Geteuid() != 0 || o.runtime == "process" {
		return false
	}
	_, err := exec.LookPath("runc")
	return err == nil
}

// startDev starts o.nodes nodelets (the `nodelet` binary next to this
// one, else on PATH) and waits until all have registered.
func startDev(ctx context.Context, o options, addr string, srv *sched.Server, log *slog.Logger) (*devCluster, error) {
	bin, err := nodeletBinary()
	if err != nil {
		return nil, err
	}
	netnsHosts := useNetnsHosts(o)
	secret := filepath.Join(o.dataDir, "session-secret")
	if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
		return nil, err
	}
	if _, err := sshkey.LoadSecret(secret, true); err != nil {
		return nil, err
	}
	c := &devCluster{log: log}
	if os.Geteuid() == 0 {
		sweepHosts(log)
	}
	// Job mounts, submit directories and the host image's homes must lie
	// under these on the dev nodes (a nodelet.hcl's allowed_mount_roots
	// replaces them).
	log.Info("dev nodelets allow job mounts under", "roots", strings.Join(devhosts.MountRoots(), ", "))
	if netnsHosts {
		if c.hosts, err = devhosts.Create(o.nodes); err != nil {
			return nil, fmt.Errorf("dev test hosts: %w", err)
		}
		if err := c.hosts.Route(); err != nil {
			c.stop(time.Second)
			return nil, fmt.Errorf("dev test hosts: routes of their container subnets: %w", err)
		}
		log.Info("dev nodelets run in test hosts", "underlay", devhosts.Subnet, "bridge", c.hosts.Bridge, "gateway", c.hosts.Gateway,
			"containers", c.hosts.Containers)
	}
	for i := 1; i <= o.nodes; i++ {
		name := "node" + strconv.Itoa(i)
		advertise := "127.0.0.1"
		if c.hosts != nil {
			advertise = c.hosts.Hosts[i-1].IP
		}
		args := nodeletArgs(o, addr, name, advertise, secret, c.hosts == nil)
		if c.hosts != nil && c.hosts.Containers != "" {
			// Routed as on a site: this machine (the submit host) and
			// the other hosts reach the containers at their own
			// addresses; they reach this machine and one another
			// without NAT.
			args = append(args, "--default-subnet", c.hosts.Hosts[i-1].Subnet,
				"--routed-networks", c.hosts.Containers+","+c.hosts.Uplink, "--reach-from", c.hosts.Gateway+"/32")
		}
		cmd := exec.Command(bin, args...)
		if c.hosts != nil {
			cmd = c.hosts.Command(i-1, bin, args...) // nsenter execs the nodelet: same pid
		}
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		// Own process group: a terminal's Ctrl-C reaches schedd, which
		// stops the nodelets in order. If schedd dies, even by SIGKILL,
		// they get SIGTERM and stop their containers (startChild).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
		if err := startChild(cmd); err != nil {
			c.stop(time.Second)
			return nil, fmt.Errorf("starting %s: %w", name, err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		c.procs, c.done = append(c.procs, cmd), append(c.done, done)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n := len(srv.Store().Snapshot().Nodes()); n >= o.nodes {
			return c, nil
		}
		for i, d := range c.done {
			select {
			case <-d:
				c.stop(time.Second)
				return nil, fmt.Errorf("nodelet node%d exited during start-up (see its log above)", i+1)
			default:
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			c.stop(time.Second)
			return nil, fmt.Errorf("nodelets did not register within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nodeletArgs is the command line of dev nodelet name; shared: the
// nodelets share this machine's network.
func nodeletArgs(o options, addr, name, advertise, secret string, shared bool) []string {
	args := []string{"--addr", addr, "--name", name,
		"--state-dir", filepath.Join(o.dataDir, "nodes", name),
		"--runtime", o.runtime, "--advertise", advertise,
		"--session-secret", secret,
		"--stop-grace", o.stopGrace.String()}
	if o.runDir != "" {
		args = append(args, "--run-dir", filepath.Join(o.runDir, name))
	}
	if shared && o.nodes > 1 {
		// Nodelets sharing one network cannot build overlays
		// between themselves: containers use the node's network.
		args = append(args, "--network", "host")
	}
	if o.images != "" {
		args = append(args, "--images", o.images)
	}
	if o.nodeCPU > 0 {
		args = append(args, "--cpu", strconv.FormatFloat(o.nodeCPU, 'g', -1, 64))
	}
	if o.nodeMem != "" {
		args = append(args, "--memory", o.nodeMem)
	}
	if o.fakeGPUs > 0 {
		args = append(args, "--fake-gpus", strconv.Itoa(o.fakeGPUs))
	}
	if o.verbose {
		args = append(args, "-v")
	}
	return args
}

// stop sends SIGTERM to every nodelet and waits up to grace for them to
// stop their containers, then kills what is left.
func (c *devCluster) stop(grace time.Duration) {
	for _, p := range c.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	timeout := time.After(grace)
	for i, d := range c.done {
		select {
		case <-d:
		case <-timeout:
			c.log.Warn("nodelet did not stop in time; killing it", "node", i+1)
			_ = c.procs[i].Process.Kill()
			<-d
		}
	}
	if c.hosts != nil {
		if err := c.hosts.Close(); err != nil {
			c.log.Warn("removing dev test hosts", "err", err)
		}
	}
}

// sweepHosts removes the test hosts of dev clusters whose schedd is gone
// (killed before it could remove them); those of clusters running now
// are left alone (devhosts.Sweep). It logs what it did; a failure does
// not keep this cluster from starting.
func sweepHosts(log *slog.Logger) {
	swept, err := devhosts.Sweep()
	for _, s := range swept {
		log.Info("removed the test hosts of a dev cluster whose schedd is gone", "bridge", s.Bridge, "namespaces", s.Namespaces, "pid", s.OwnerPID)
	}
	if err != nil {
		log.Warn("removing the test hosts of dev clusters whose schedd is gone", "err", err)
	}
	if left, err := devhosts.Unowned(); err == nil && len(left) > 0 {
		log.Warn("test hosts without an owner record (made by an older schedd --dev?) are left in place; `ip netns del NAME` removes one", "namespaces", left)
	}
}

// startChild starts cmd from one OS thread that lives as long as schedd.
// The kernel sends a child its parent-death signal (Pdeathsig) when the
// thread that created it ends, not the process; a goroutine runs on
// whichever thread the runtime gives it, and a thread ends when a
// goroutine locked to it returns (as code that enters a namespace does),
// so a child created from an ordinary goroutine may be signalled while
// schedd runs on. (Between fork and exec the child re-checks its parent
// and signals itself if schedd is already gone: the syscall package
// does so when Pdeathsig is set.)
func startChild(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawn = make(chan spawnReq)
		go func() {
			// Never unlocked: the goroutine never returns, and the
			// thread it holds ends only with schedd.
			runtime.LockOSThread()
			for r := range spawn {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawn <- spawnReq{cmd: cmd, done: done}
	return <-done
}

// spawnReq asks the spawning thread to start cmd.
type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	spawnOnce sync.Once
	spawn     chan spawnReq
)

func nodeletBinary() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "nodelet")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("nodelet")
	if err != nil {
		return "", fmt.Errorf("--dev needs the nodelet binary next to schedd or on PATH (run `make build`)")
	}
	return p, nil
}
