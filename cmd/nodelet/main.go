// Command nodelet is troupe's node agent: it registers with schedd, runs
// the containers assigned to this node and reports on them. SIGINT or
// SIGTERM stops and destroys every container it runs, then it exits;
// SIGQUIT exits leaving runc containers running, for the next nodelet on
// the same state dir to re-attach to (an upgrade, a restart).
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
	"strconv"
	"strings"
	"syscall"

	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/units"
	"github.com/troupe-hpc/troupe/nodelet"
	"github.com/troupe-hpc/troupe/nodelet/network"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runc"
)

// init makes this binary the containers' init in the in-process
// (--oci-runtime libcontainer) mode: libcontainer re-executes it as
// `nodelet init` to set each container up and exec its first process.
// It runs before main and anything main starts; any other invocation
// goes on at once.
func init() { runc.LibcontainerInit() }

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	cfg, verbose, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "nodelet: %v\n", err)
		return 1
	}
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signalContext()
	defer stop()
	if err := nodelet.Run(ctx, cfg, log); err != nil {
		fmt.Fprintf(stderr, "nodelet: %v\n", err)
		return 1
	}
	return 0
}

// signalContext ends on SIGINT or SIGTERM (stop everything) or SIGQUIT
// (detach: cause nodelet.ErrDetach).
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	go func() {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGQUIT {
				cancel(nodelet.ErrDetach)
			} else {
				cancel(nil)
			}
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(sigs); cancel(nil) }
}

// parseFlags turns the command line into a Config.
func parseFlags(args []string, stderr io.Writer) (nodelet.Config, bool, error) {
	fs := flag.NewFlagSet("nodelet", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		cfg        nodelet.Config
		memory     string
		configPath string
		verbose    bool
	)
	fs.StringVar(&cfg.Addr, "addr", "", "schedd address (default $"+client.EnvAddr+", else "+client.DefaultAddr+")")
	fs.StringVar(&cfg.Name, "name", "", "node name (default: hostname)")
	fs.StringVar(&cfg.StateDir, "state-dir", nodelet.DefaultStateDir, "state directory")
	fs.StringVar(&cfg.RunDir, "run-dir", "", "run directory, best a tmpfs: bundles, overlays' mountpoints, session files, OCI runtime state (default: the config file's run_dir, else "+nodelet.DefaultRunDir+" with the default state directory, else STATE_DIR/run)")
	fs.StringVar(&cfg.Runtime, "runtime", nodelet.RuntimeAuto, "container runtime: auto, runc, apptainer or process")
	fs.StringVar(&cfg.OCIRuntime, "oci-runtime", "", "OCI runtime of the runc driver: auto (the first that runs a trial container of crun, libcontainer, runc), crun, libcontainer (in-process) or runc (default: the config file's oci_runtime, else auto)")
	fs.Float64Var(&cfg.CPU, "cpu", 0, "cores offered (default: all)")
	fs.StringVar(&memory, "memory", "", "memory offered, e.g. 8GiB (default: MemTotal)")
	fs.StringVar(&cfg.Advertise, "advertise", "", "IP containers are reached at (default 127.0.0.1 for a local schedd, else the first non-loopback)")
	fs.StringVar(&cfg.InitBinary, "init", "", "troupe-init binary (default: next to nodelet)")
	fs.StringVar(&cfg.SSHBinary, "ssh", "", "troupe-ssh binary mounted into containers (default: next to nodelet)")
	fs.StringVar(&cfg.SlurmBinary, "slurm", "", "troupe-slurm binary mounted into containers as srun (default: next to nodelet, if there)")
	fs.StringVar(&cfg.Network, "network", nodelet.NetworkAuto, "containers' network: auto (session with runc), session or host")
	fs.StringVar(&cfg.SessionSecret, "session-secret", "", "file session SSH keys derive from; the same on every node (default: STATE-DIR/session-secret, made if missing)")
	fs.DurationVar(&cfg.StopGrace, "stop-grace", nodelet.DefaultStopGrace, "SIGTERM to SIGKILL grace period")
	fs.DurationVar(&cfg.Heartbeat, "heartbeat", 0, "at most this long between heartbeats (default: as schedd announces, its --node-timeout / 8)")
	fs.StringVar(&cfg.FenceBinary, "fence", "", "troupe-fence binary, which kills the node's containers when its lease from schedd runs out (default: next to nodelet)")
	fs.StringVar(&configPath, "config", "", "nodelet.hcl with the node's settings (default $"+nodelet.EnvConfig+", else "+nodelet.DefaultConfigFile+" if it exists)")
	fs.StringVar(&cfg.Images, "images", "", "image catalog (etc/images.hcl) job image names resolve in")
	fs.IntVar(&cfg.FakeGPUs, "fake-gpus", 0, "report this many fake GPUs instead of discovering them (tests)")
	fs.StringVar(&cfg.JoinTokenFile, "join-token-file", "", "file with the cluster's join token (schedd --join-token-file): register over TCP with it")
	fs.StringVar(&cfg.CA, "ca", "", "PEM file of the CA that signed schedd's TLS certificate (default: system CAs and $TROUPE_CA)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics, e.g. 127.0.0.1:9101 (default: off)")
	fs.IntVar(&cfg.MaxStreamsPerJob, "max-streams-per-job", 0, "the most terminal and app streams one job may have open at once (default 32; -1: unlimited)")
	fs.IntVar(&cfg.MaxStreamsPerUser, "max-streams-per-user", 0, "the most terminal and app streams the jobs of one user may have open at once (default 200; -1: unlimited)")
	fs.IntVar(&cfg.MaxStreams, "max-streams", 0, "the most terminal and app streams open at once in all (default: a quarter of what the limit of open files leaves beyond an eighth of it)")
	fs.StringVar(&cfg.DefaultSubnet, "default-subnet", "", "IPv4 subnet of the node's default network, or none (default: the config file's default_subnet, else "+network.DefaultSubnet+")")
	fs.Func("routed-networks", "comma-separated IPv4 CIDRs containers reach with their own address, not masqueraded: the cluster's container range and the submit hosts' networks (default: the config file's routed_networks, else none: NAT to everything)", func(v string) error {
		cfg.RoutedNetworks = splitList(v)
		return nil
	})
	fs.Func("reach-from", "comma-separated IPv4 CIDRs that may open connections to any container of the node: the submit hosts (default: the config file's reach_from, else none)", func(v string) error {
		cfg.ReachFrom = splitList(v)
		return nil
	})
	fs.Func("host-ports", "comma-separated ports of the node itself its containers may connect to, TCP and UDP (default: the config file's host_ports, else none)", func(v string) error {
		cfg.HostPorts = []int{}
		for _, f := range splitList(v) {
			p, err := strconv.Atoi(f)
			if err != nil {
				return fmt.Errorf("%q is not a port", f)
			}
			cfg.HostPorts = append(cfg.HostPorts, p)
		}
		return nil
	})
	fs.BoolVar(&verbose, "v", false, "debug logging")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.PrintDefaults()
		}
		return cfg, false, err
	}
	if fs.NArg() > 0 {
		return cfg, false, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg.Addr = client.ResolveAddr(cfg.Addr)
	if p := nodelet.ConfigPath(configPath); p != "" {
		f, err := nodelet.LoadFile(p)
		if err != nil {
			return cfg, false, err
		}
		f.Apply(&cfg)
	}
	// This process is the agent alone: its fence may kill every other
	// child of it (the process runtime's containers) at the deadline.
	cfg.FenceChildren = true
	if err := checkFlags(&cfg, memory); err != nil {
		return cfg, false, err
	}
	return cfg, verbose, nil
}

func checkFlags(cfg *nodelet.Config, memory string) error {
	switch cfg.Runtime {
	case nodelet.RuntimeAuto, nodelet.RuntimeRunc, nodelet.RuntimeApptainer, nodelet.RuntimeProcess:
	default:
		return fmt.Errorf("--runtime %q: want auto, runc, apptainer or process", cfg.Runtime)
	}
	switch cfg.OCIRuntime {
	case "", nodelet.OCIAuto, nodelet.OCICrun, nodelet.OCILibcontainer, nodelet.OCIRunc:
	case nodelet.OCIFake: // a benchmark aid: the config file must allow it (nodelet.ErrFakeRuntime)
	default:
		return fmt.Errorf("--oci-runtime %q: want auto, crun, libcontainer or runc", cfg.OCIRuntime)
	}
	switch cfg.Network {
	case nodelet.NetworkAuto, nodelet.NetworkSession, nodelet.NetworkHost:
	default:
		return fmt.Errorf("--network %q: want auto, session or host", cfg.Network)
	}
	if cfg.CPU < 0 {
		return fmt.Errorf("--cpu %g: must not be negative", cfg.CPU)
	}
	if cfg.Heartbeat < 0 {
		return fmt.Errorf("--heartbeat %s: must not be negative", cfg.Heartbeat)
	}
	if cfg.MaxStreamsPerJob < -1 || cfg.MaxStreamsPerUser < -1 || cfg.MaxStreams < 0 {
		return errors.New("--max-streams-per-job and --max-streams-per-user take -1 (unlimited), 0 (the default) or more; --max-streams 0 (derived from the limit of open files) or more")
	}
	if err := nodelet.CheckReach(cfg.RoutedNetworks, cfg.ReachFrom, cfg.HostPorts); err != nil {
		return fmt.Errorf("--routed-networks, --reach-from, --host-ports: %w", err)
	}
	if cfg.JoinTokenFile != "" {
		if _, err := auth.ReadSecretFile(cfg.JoinTokenFile); err != nil {
			return fmt.Errorf("--join-token-file: %w", err)
		}
	}
	if cfg.CA != "" {
		// The agent's client reads the CA as every troupe client does.
		if err := os.Setenv(client.EnvCA, cfg.CA); err != nil {
			return err
		}
	}
	if cfg.StopGrace < 0 {
		return fmt.Errorf("--stop-grace %s: must not be negative", cfg.StopGrace)
	}
	if memory != "" {
		n, err := units.ParseSize(memory)
		if err == nil && n <= 0 {
			err = fmt.Errorf("%q: the node must offer some memory", memory)
		}
		if err != nil {
			return fmt.Errorf("--memory: %w", err)
		}
		cfg.Memory = n
	}
	return nil
}

// splitList splits a comma-separated flag value, dropping empty fields.
func splitList(v string) []string {
	out := []string{}
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
