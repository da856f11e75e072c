// Command troupe-nodesim runs many simulated nodes in one process against
// a real schedd: each registers, heartbeats, follows its assignments and
// reports its containers as nodelet does, but its containers only
// pretend to run (package nodelet/nodesim). It shows how schedd behaves
// on a big cluster without the machines. SIGINT or SIGTERM stops every
// pretend container (reported killed), then it exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/fdlimit"
	"github.com/troupe-hpc/troupe/internal/units"
	"github.com/troupe-hpc/troupe/nodelet/nodesim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, verbose, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "troupe-nodesim: %v\n", err)
		return 2
	}
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg.Registered = func(d time.Duration) {
		fmt.Fprintf(stdout, "troupe-nodesim: %d nodes registered in %s\n", cfg.Nodes, d.Round(time.Millisecond))
	}
	// Each node holds a connection, and schedd one per node too.
	if soft, hard, err := fdlimit.Raise(); err != nil {
		fmt.Fprintf(stderr, "troupe-nodesim: warning: raising the limit of open files from %d to the hard limit %d: %v\n", soft, hard, err)
	} else if soft < uint64(cfg.Nodes)+256 {
		fmt.Fprintf(stderr, "troupe-nodesim: warning: --nodes %d holds a connection per node, but open files are limited to %d (ulimit -Hn): "+
			"queries will fail with \"too many open files\"; raise the limit (for schedd too) or run fewer nodes\n", cfg.Nodes, soft)
	}
	sim, err := nodesim.New(cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "troupe-nodesim: %v\n", err)
		return 1
	}
	_ = sim.Run(ctx)
	st := sim.Stats()
	fmt.Fprintf(stdout, "troupe-nodesim: stopped; containers run %d, exited %d, killed %d, failed %d\n",
		st.Started, st.Exited, st.Killed, st.Failed)
	return 0
}

func parseFlags(args []string, stderr io.Writer) (nodesim.Config, bool, error) {
	fs := flag.NewFlagSet("troupe-nodesim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: troupe-nodesim [flags]

Runs --nodes simulated nodes in this process against a real schedd. Their
containers pretend to run for the job's $%s (else its walltime,
else --duration), then exit with $%s (default 0).

  troupe-nodesim --addr unix:///tmp/troupe/schedd.sock --nodes 1000

flags:
`, nodesim.EnvDuration, nodesim.EnvExit)
		fs.PrintDefaults()
	}
	var (
		cfg              nodesim.Config
		memory, labels   string
		joinFile, caFile string
		verbose          bool
	)
	fs.StringVar(&cfg.Addr, "addr", "", "schedd address (default $"+client.EnvAddr+", else "+client.DefaultAddr+")")
	fs.IntVar(&cfg.Nodes, "nodes", 100, "how many simulated nodes to run")
	fs.StringVar(&cfg.Prefix, "prefix", "sim", "node names are PREFIX01…PREFIXNN, the number zero-padded to the width of --nodes")
	fs.Float64Var(&cfg.CPU, "cpu", 32, "cores each node offers")
	fs.StringVar(&memory, "memory", "128GiB", "memory each node offers, e.g. 128GiB")
	fs.IntVar(&cfg.GPUs, "gpus", 0, "GPUs each node offers")
	fs.StringVar(&labels, "partition-labels", "", "labels each node registers with, comma-separated: partitions.hcl's labels select nodes by them")
	fs.StringVar(&joinFile, "join-token-file", "", "file with the cluster's join token (schedd --join-token-file): register over TCP with it, each node getting its own credential")
	fs.StringVar(&caFile, "ca", "", "PEM file of the CA that signed schedd's TLS certificate (default: system CAs and $"+client.EnvCA+")")
	fs.DurationVar(&cfg.Heartbeat, "heartbeat", 0, "at most this long between a node's heartbeats (default: as schedd announces, its --node-timeout / 8)")
	fs.DurationVar(&cfg.Duration, "duration", nodesim.DefaultDuration, "how long a container runs when its job sets neither $"+nodesim.EnvDuration+" nor a walltime")
	fs.DurationVar(&cfg.Prepare, "prepare", 0, "how long a container stays preparing before it runs (an image pull)")
	fs.BoolVar(&cfg.FirstOutput, "first-output", false, "as each container starts running, write the wall clock (seconds since the epoch, as busybox ts %.s prints it) as its output file's only line (make bench-sessions RUNTIME=nodesim measures it)")
	fs.IntVar(&cfg.RegisterConcurrency, "register-concurrency", nodesim.DefaultRegisterConcurrency, "at most this many registrations in flight at once")
	fs.BoolVar(&verbose, "v", false, "debug logging")
	if err := fs.Parse(args); err != nil {
		return cfg, false, err
	}
	if fs.NArg() > 0 {
		return cfg, false, fmt.Errorf("unexpected argument %q (see troupe-nodesim -h)", fs.Arg(0))
	}
	cfg.Addr = client.ResolveAddr(cfg.Addr)
	switch {
	case cfg.Nodes < 1:
		return cfg, false, fmt.Errorf("--nodes %d: want at least 1", cfg.Nodes)
	case cfg.CPU <= 0:
		return cfg, false, fmt.Errorf("--cpu %g: each node must offer some", cfg.CPU)
	case cfg.GPUs < 0:
		return cfg, false, fmt.Errorf("--gpus %d: must not be negative", cfg.GPUs)
	case cfg.Heartbeat < 0:
		return cfg, false, fmt.Errorf("--heartbeat %s: must not be negative", cfg.Heartbeat)
	case cfg.Duration < 0:
		return cfg, false, fmt.Errorf("--duration %s: must not be negative", cfg.Duration)
	case cfg.Prepare < 0:
		return cfg, false, fmt.Errorf("--prepare %s: must not be negative", cfg.Prepare)
	case cfg.RegisterConcurrency < 1:
		return cfg, false, fmt.Errorf("--register-concurrency %d: want at least 1", cfg.RegisterConcurrency)
	}
	n, err := units.ParseSize(memory)
	if err == nil && n <= 0 {
		err = fmt.Errorf("%q: each node must offer some memory", memory)
	}
	if err != nil {
		return cfg, false, fmt.Errorf("--memory: %w", err)
	}
	cfg.Memory = n
	for _, l := range strings.Split(labels, ",") {
		if l = strings.TrimSpace(l); l != "" {
			cfg.Labels = append(cfg.Labels, l)
		}
	}
	if joinFile != "" {
		if cfg.JoinToken, err = auth.ReadSecretFile(joinFile); err != nil {
			return cfg, false, fmt.Errorf("--join-token-file: %w", err)
		}
	}
	cfg.CA = caFile
	if cfg.CA == "" {
		cfg.CA = os.Getenv(client.EnvCA)
	}
	cfg.Token = os.Getenv(client.EnvToken)
	return cfg, verbose, nil
}
