// Package nodesim runs many simulated nodes in one process against a
// real schedd, to see how the controller and its state behave on a big
// cluster without the machines (as Nomad's nomad-nodesim and Flux's fake
// resources do).
//
// Each simulated node speaks the /v1 node API as nodelet does: it
// registers (with the join token when given, then with its own
// credential), heartbeats as often as schedd's lease asks and keeps that
// lease, follows its assignments with blocking queries, and reports its
// containers preparing, running and exited (or killed, or failed) in
// order, batched, retried until schedd takes them. Only the executor is
// pretend: a container "runs" for a while and exits, with no process, no
// image, no network. How long, and with which code, the job says in its
// environment:
//
//	TROUPE_SIM_DURATION  how long each container runs, e.g. 1s (default:
//	                     the job's walltime, else Config.Duration)
//	TROUPE_SIM_EXIT      the exit code, 0 to 255 (default 0)
//
// A value that is not one of those fails the container at start, with a
// message naming the variable, as a container that cannot start does.
//
// Nothing inside schedd knows the nodes are simulated: what it schedules,
// commits and exports is what a cluster of N nodelets makes it do. What a
// nodelet does besides (images, networks, output files, signals, attach,
// metrics) is not simulated.
//
// It must not import sched/... or the agent (package nodelet): like a
// nodelet, it reaches a real schedd through internal/client.
package nodesim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-hpc/troupe/internal/client"
)

// Environment variables a job sets to steer its simulated containers.
const (
	EnvDuration = "TROUPE_SIM_DURATION"
	EnvExit     = "TROUPE_SIM_EXIT"
)

// Runtime is the runtime simulated nodes register with.
const Runtime = "sim"

// DefaultDuration is how long a container of a job that sets neither
// TROUPE_SIM_DURATION nor a walltime runs.
const DefaultDuration = 10 * time.Second

// DefaultRegisterConcurrency bounds the registrations in flight at once.
const DefaultRegisterConcurrency = 256

// Config describes the simulated nodes. Zero fields get the defaults
// noted.
type Config struct {
	Addr   string // schedd address (see client.New); required
	Nodes  int    // how many; at least 1
	Prefix string // names are Prefix01…PrefixNN, zero-padded to the width of Nodes; default "sim"
	CPU    float64
	Memory int64 // bytes
	GPUs   int
	// Labels are sent on registration: partitions.hcl selects nodes by
	// them (a partition's labels).
	Labels []string
	// JoinToken is the cluster's join token: registration presents it
	// and each node gets its own credential for everything after. "":
	// every node acts with the client's identity (Token, or the unix
	// socket's caller).
	JoinToken string
	Token     string // bearer token for TCP addresses when no JoinToken
	CA        string // PEM file of the CA of schedd's TLS certificate
	// Heartbeat caps the heartbeat interval (0: as schedd announces).
	Heartbeat time.Duration
	// Duration is how long a container runs when its job sets neither
	// TROUPE_SIM_DURATION nor a walltime (default DefaultDuration).
	Duration time.Duration
	// Prepare is how long a container stays preparing before it runs.
	Prepare time.Duration
	// FirstOutput: as each container starts running, the wall clock
	// (seconds since the epoch, microseconds; as busybox `ts %.s`
	// prints it) is written as the only line of its output file, where
	// its job's output pattern puts it (firstOutput): the "first
	// output" a benchmark measures (make bench-sessions RUNTIME=nodesim).
	// False: no file is written.
	FirstOutput bool
	// RegisterConcurrency bounds the registrations in flight (default
	// DefaultRegisterConcurrency): schedd's listen backlog and raft take
	// them in batches anyway, and ten thousand dials at once would be
	// refused by the kernel.
	RegisterConcurrency int
	// Registered, when set, is called once, when every node has
	// registered, with the time that took.
	Registered func(time.Duration)
}

// Stats counts what the simulated nodes did.
type Stats struct {
	Registered int64 // nodes registered (re-registrations included)
	Started    int64 // containers that ran
	Exited     int64 // containers that exited by themselves
	Killed     int64 // containers stopped because their job ended or was killed
	Failed     int64 // containers failed (bad TROUPE_SIM_*, lease lost)
}

// Sim is a running set of simulated nodes.
type Sim struct {
	cfg   Config
	log   *slog.Logger
	base  *client.Client
	nodes []*node
	join  *client.Client // registers with the join token; nil without one
	regs  chan struct{}  // RegisterConcurrency slots

	registered, started, exited, killed, failed atomic.Int64
}

// withDefaults fills zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Addr == "":
		return c, errors.New("no schedd address")
	case c.Nodes < 1:
		return c, fmt.Errorf("nodes %d: want at least 1", c.Nodes)
	case c.CPU <= 0:
		return c, fmt.Errorf("cpu %g: each node must offer some", c.CPU)
	case c.Memory <= 0:
		return c, fmt.Errorf("memory %d: each node must offer some", c.Memory)
	case c.GPUs < 0:
		return c, fmt.Errorf("gpus %d: must not be negative", c.GPUs)
	case c.Heartbeat < 0 || c.Duration < 0 || c.Prepare < 0:
		return c, errors.New("heartbeat, duration and prepare must not be negative")
	}
	if c.Prefix == "" {
		c.Prefix = "sim"
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.RegisterConcurrency <= 0 {
		c.RegisterConcurrency = DefaultRegisterConcurrency
	}
	return c, nil
}

// Name is the name of node i (1-based) of n with prefix: the number is
// zero-padded to the width of n, so that partitions.hcl ranges such as
// sim[0001-5000] select them.
func Name(prefix string, i, n int) string {
	return fmt.Sprintf("%s%0*d", prefix, len(strconv.Itoa(n)), i)
}

// New checks cfg and prepares the nodes; Run starts them.
func New(cfg Config, log *slog.Logger) (*Sim, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// One connection pool for every node: a blocking query is held per
	// node, and each keeps its connection for the next one.
	base, err := client.NewWith(cfg.Addr, client.Options{CA: cfg.CA, Token: cfg.Token, IdleConns: cfg.Nodes + 64})
	if err != nil {
		return nil, err
	}
	s := &Sim{cfg: cfg, log: log, base: base, regs: make(chan struct{}, cfg.RegisterConcurrency)}
	if cfg.JoinToken != "" {
		s.join = base.WithToken(cfg.JoinToken)
	}
	for i := 1; i <= cfg.Nodes; i++ {
		s.nodes = append(s.nodes, newNode(s, Name(cfg.Prefix, i, cfg.Nodes)))
	}
	return s, nil
}

// Stats returns the counts so far.
func (s *Sim) Stats() Stats {
	return Stats{Registered: s.registered.Load(), Started: s.started.Load(), Exited: s.exited.Load(),
		Killed: s.killed.Load(), Failed: s.failed.Load()}
}

// Run runs every node until ctx ends, then stops their containers
// (reported killed) and delivers what is left to report for up to 3
// seconds. It returns nil once all have stopped.
func (s *Sim) Run(ctx context.Context) error {
	begin := time.Now()
	var wg, regWG sync.WaitGroup
	regWG.Add(len(s.nodes))
	for _, n := range s.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.run(ctx, regWG.Done)
		}()
	}
	if s.cfg.Registered != nil {
		go func() {
			regWG.Wait()
			if ctx.Err() == nil {
				s.cfg.Registered(time.Since(begin))
			}
		}()
	}
	wg.Wait()
	return nil
}

// Run is New and Sim.Run.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	s, err := New(cfg, log)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}
