package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/troupe-hpc/troupe/sched"
)

// devCluster is the nodelet processes of `schedd --dev`.
type devCluster struct {
	procs []*exec.Cmd
	done  []chan struct{}
	log   *slog.Logger
}

// startDev starts o.nodes nodelets (the `nodelet` binary next to this
// one, else on PATH) and waits until all have registered.
func startDev(ctx context.Context, o options, addr string, srv *sched.Server, log *slog.Logger) (*devCluster, error) {
	bin, err := nodeletBinary()
	if err != nil {
		return nil, err
	}
	c := &devCluster{log: log}
	for i := 1; i <= o.nodes; i++ {
		name := "node" + strconv.Itoa(i)
		args := []string{"--addr", addr, "--name", name,
			"--state-dir", filepath.Join(o.dataDir, "nodes", name),
			"--runtime", o.runtime, "--advertise", "127.0.0.1",
			"--stop-grace", o.stopGrace.String()}
		if o.nodeCPU > 0 {
			args = append(args, "--cpu", strconv.FormatFloat(o.nodeCPU, 'g', -1, 64))
		}
		if o.nodeMem != "" {
			args = append(args, "--memory", o.nodeMem)
		}
		if o.verbose {
			args = append(args, "-v")
		}
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		// Own process group: a terminal's Ctrl-C reaches schedd, which
		// stops the nodelets in order. If schedd dies, they get SIGTERM.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
		if err := cmd.Start(); err != nil {
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
}

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
