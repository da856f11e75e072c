package nodelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/catalog"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/connlimit"
	"github.com/troupe-hpc/troupe/internal/units"
	"github.com/troupe-hpc/troupe/nodelet/fence"
	"github.com/troupe-hpc/troupe/nodelet/gpu"
	"github.com/troupe-hpc/troupe/nodelet/network"
	"github.com/troupe-hpc/troupe/nodelet/report"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runc"
	"github.com/troupe-hpc/troupe/nodelet/session"
	"github.com/troupe-hpc/troupe/nodelet/sshkey"
)

// assignmentsWait is how long one blocking assignments query may wait.
const assignmentsWait = 30 * time.Second

// announceWait is how long an assignments query waits while an
// announced container waits for schedd's answer (reconciler.announced).
const announceWait = time.Second

// key names one container of one job.
type key struct {
	job  uint64
	host string
	run  int // the job's Requeues: a requeued job is a new run
}

// agent is the state of one Run, shared by its roles, and their wiring.
// Each role is a type of its own that reaches the shared state through
// the agent it embeds; a role calls another through the agent's field
// for it (a.launch.startTask), so what each role offers the others is
// spelled at the call.
type agent struct {
	reg      *registrar     // registration, heartbeat and the node's lease
	recon    *reconciler    // the assignments followed and acted on
	reports  *reporter      // updates for schedd and the outcome log
	launch   *launcher      // a container's life: start, supervise, stop
	specs    *specBuilder   // a container's spec, files and image
	recovery *recoverer     // records, and re-attaching after a restart
	sessions *sessionServer // terminals and apps served to attach clients
	health   *healthChecker // the node's health checks, their verdict for the heartbeat

	cfg     Config
	log     *slog.Logger
	cli     schedd // *client.Client but in tests
	rt      runtime.Runtime
	rep     *report.Queue
	net     *network.Manager // nil: containers share the node's network
	gpus    []gpu.Device
	mps     *mpsDaemon // the MPS control daemon of fractional GPU shares
	cpus    *cpuSet    // the CPUs containers of whole cores hold (cpuset.go)
	metrics *metrics
	fence   *leaseKeeper // the lease from schedd and troupe-fence

	mu       sync.Mutex
	running  map[key]*task   // started here, not yet destroyed
	finished map[key]bool    // ended here; kept while schedd still assigns it
	last     api.Assignments // the last answer reconciled: a task that ends reconciles it again
}

// registrar registers the node with schedd, sends its heartbeats and
// keeps the lease they renew (fence.go).
type registrar struct {
	*agent
	oci string // the runc driver's OCI runtime and version ("crun 1.8.1"); "" for others
	// instance tells this nodelet from another under the same name
	// (loadInstance); sent on register and heartbeat.
	instance string
}

// reconciler follows the node's assignments and makes the containers
// here match them (reconcile.go). Its fields are under a.mu.
type reconciler struct {
	*agent
	told  map[key]uint64 // finished keys whose end was told again, at which answer's index
	acked map[key]bool   // finished keys schedd has shown ended since
	// keptUnassigned: the last answer said schedd's state holds no job
	// yet, and the containers running here were kept (logged once).
	keptUnassigned bool
	// toldAdopt is the adoption window (api.Assignments.AdoptUntil)
	// in which this nodelet told schedd the ends it keeps (tellKept).
	toldAdopt time.Time
	// announced are the containers running here that schedd stopped
	// assigning while its state holds jobs: each is reported running
	// (under its job's session) before it is stopped, so that a state
	// that went back (a restore) to before the job started can adopt it
	// instead of running it twice (see unassigned).
	announced map[key]*announcement
	// queries counts the assignments queries issued (the loop's);
	// lastQuery is the one last answered (reconcile).
	queries, lastQuery uint64
	// assigned: last holds an answer of schedd's. Until the first one,
	// an empty last says nothing: a restarted nodelet's re-attached
	// containers are in no assignment yet, and reconciling against it
	// would stop them all (a lease granted, a task ended meanwhile).
	assigned bool
}

// reporter sends containers' updates to schedd and keeps their final
// ones (outcomeLog).
type reporter struct {
	*agent
	// outcomes keeps the final updates of the containers that ended
	// here, the last maxOutcomes, after schedd stops assigning them: a
	// schedd whose state went back (a restore) and shows one running
	// again is told its true end, not that it was lost.
	outcomes outcomeLog
}

// launcher runs a container's task: start, supervise (outputs,
// signals), stop and destroy, or detach (task.go).
type launcher struct {
	*agent
	tasks sync.WaitGroup // the tasks running: Run waits for them to end
}

// specBuilder makes what the runtime needs for a container: its spec,
// files, home and image (spec.go).
type specBuilder struct {
	*agent
	// feat is what containers get beyond the environment.
	feat    session.Features
	secret  []byte           // session keys derive from it (package sshkey)
	catalog *catalog.Catalog // image names; nil: none known
	tools   *toolCopies      // the binaries runc containers link (tools.go)
}

// recoverer keeps the records of started containers and re-attaches to
// them after a restart (recover.go).
type recoverer struct{ *agent }

// sessionServer serves the terminals and apps of the containers here to
// attach clients (attach.go, apps.go).
type sessionServer struct {
	*agent
	streams *connlimit.Streams // the terminal and app streams served; nil: no caps
}

// wire gives a its roles; a holds the state they share.
func (a *agent) wire() *agent {
	a.reg = &registrar{agent: a}
	a.recon = &reconciler{agent: a, told: map[key]uint64{}, acked: map[key]bool{}}
	a.reports = &reporter{agent: a}
	a.launch = &launcher{agent: a}
	a.specs = &specBuilder{agent: a}
	a.recovery = &recoverer{a}
	a.sessions = &sessionServer{agent: a}
	return a
}

// Run is the node agent: see the package documentation for its loop. It
// returns nil after ctx is cancelled and every container it ran is
// destroyed, or an error when it cannot start at all.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	return run(ctx, cfg, log, parts{})
}

// parts stand in for what the agent otherwise makes from its Config;
// Run gives none, the package's tests a fake schedd or a runtime they
// watch.
type parts struct {
	schedd      schedd                                // in place of a client for Config.Addr
	wrapRuntime func(runtime.Runtime) runtime.Runtime // around the runtime Config names
}

func run(ctx context.Context, cfg Config, log *slog.Logger, p parts) error {
	a, err := newAgent(cfg, log, p)
	if err != nil {
		return err
	}
	if a.cfg.MetricsAddr != "" {
		addr, err := a.metrics.serve(ctx, a.cfg.MetricsAddr, a.log)
		if err != nil {
			return err
		}
		a.log.Info("serving metrics", "addr", "http://"+addr.String()+"/metrics")
	}
	if err := a.reg.startFence(); err != nil {
		return fmt.Errorf("starting the fence: %w", err)
	}
	recs, err := a.recovery.recoverLeftovers(ctx)
	if err != nil {
		a.fence.stop(true)
		return err
	}
	a.recovery.adopt(ctx, recs)
	// The first health check runs before the node registers: a failing
	// node's first heartbeat, sent at once, drains it before it is
	// given much work.
	a.health.check(ctx)
	go a.health.loop(ctx)
	if err := a.reg.register(ctx); err != nil {
		a.launch.tasks.Wait()
		a.fence.stop(!detaching(ctx) || !a.canDetach())
		return nil // ctx cancelled while schedd was away
	}
	repCtx, stopRep := context.WithCancel(context.WithoutCancel(ctx))
	go a.rep.Run(repCtx)
	go a.reg.heartbeat(ctx)
	go a.sessions.attachLoop(ctx)
	a.recon.loop(ctx)
	a.launch.tasks.Wait() // every task stops and destroys on ctx cancel, or detaches
	a.fence.stop(!detaching(ctx) || !a.canDetach())
	if a.net != nil && (!detaching(ctx) || !a.canDetach()) {
		if err := a.net.Close(); err != nil { // containers left running keep it
			a.log.Warn("removing the default network", "err", err)
		}
	}
	stopRep()
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if err := a.rep.Drain(drainCtx); err != nil {
		a.log.Warn("final reports not delivered", "err", err, "queued", a.rep.Pending())
	}
	a.log.Info("nodelet stopped")
	return nil
}

func newAgent(cfg Config, log *slog.Logger, p parts) (*agent, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cli := p.schedd
	if cli == nil {
		if cli, err = dialSchedd(cfg, "", false); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{cfg.StateDir, cfg.RunDir, filepath.Join(cfg.StateDir, "homes")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	rt, err := newRuntime(cfg, log)
	if err != nil {
		return nil, err
	}
	oci := ""
	if r, ok := rt.(interface{ OCI() string }); ok {
		oci = r.OCI()
	}
	if p.wrapRuntime != nil {
		rt = p.wrapRuntime(rt)
	}
	a := &agent{
		cfg: cfg, log: log, cli: cli, rt: rt,
		running: map[key]*task{}, finished: map[key]bool{},
		mps:  &mpsDaemon{dir: filepath.Join(cfg.StateDir, "mps"), log: log},
		cpus: newCPUSet(nil),
	}
	a.wire()
	a.reg.oci = oci
	a.sessions.streams = newStreams(cfg)
	a.specs.tools = newToolCopies(a.toolsDir())
	a.metrics = newMetrics(a)
	if a.reg.instance, err = loadInstance(cfg.StateDir); err != nil {
		return nil, err
	}
	if cfg.Images != "" {
		if a.specs.catalog, err = catalog.Load(cfg.Images); err != nil {
			return nil, err
		}
	}
	a.gpus = gpu.Discover(cfg.FakeGPUs, log)
	a.health = newHealthChecker(a)
	if err := a.setupNetwork(); err != nil {
		return nil, err
	}
	a.setupSrun()
	a.rep = report.New(func(ctx context.Context, r api.ContainerReport) error {
		return cli.Report(ctx, cfg.Name, r)
	}, log, true)
	log.Info("nodelet starting", "name", cfg.Name, "schedd", cfg.Addr, "runtime", rt.Name(), "oci", oci,
		"cpu", cfg.CPU, "memory", cfg.Memory, "advertise", cfg.Advertise, "init", cfg.InitBinary,
		"network", a.net != nil, "ssh", a.specs.feat.Tools, "mount_roots", strings.Join(cfg.AllowedMountRoots, ", "))
	return a, nil
}

// setupSrun gives every container troupe's srun, whatever its network:
// runc lays troupe-slurm into the container at session.SrunPath; plain
// processes (runtime process) see the host's files, so they get the
// directory of Slurm's links that make build and make install lay out
// beside troupe-slurm's (PREFIX/libexec/troupe/slurm for
// PREFIX/bin/troupe-slurm) first on PATH, where there is one. Without
// troupe-slurm, or for another runtime, a job gets no srun of troupe's.
func (a *agent) setupSrun() {
	if a.cfg.SlurmBinary == "" {
		return
	}
	switch a.rt.Name() {
	case runc.Name:
		a.specs.feat.Srun = true
	case RuntimeProcess:
		dir := filepath.Join(filepath.Dir(filepath.Dir(a.cfg.SlurmBinary)), "libexec", "troupe", "slurm")
		if srunLinks(dir, a.cfg.SlurmBinary) {
			a.specs.feat.Srun, a.specs.feat.SlurmDir = true, dir
			return
		}
		a.log.Warn("plain processes get no srun of troupe's: no links to troupe-slurm beside it", "want", filepath.Join(dir, "srun"))
	}
}

// srunLinks says whether dir/srun is troupe-slurm (a link to bin, as
// make lays them out).
func srunLinks(dir, bin string) bool {
	a, err := os.Stat(filepath.Join(dir, "srun"))
	if err != nil {
		return false
	}
	b, err := os.Stat(bin)
	return err == nil && os.SameFile(a, b)
}

// setupNetwork decides the containers' network and tools: with an
// isolating runtime, session networks (package network), troupe-ssh and
// the session keys.
func (a *agent) setupNetwork() error {
	isolated := a.rt.Name() == runc.Name
	switch a.cfg.Network {
	case NetworkHost:
		return nil
	case NetworkSession:
		if !isolated {
			return fmt.Errorf("session networks need an isolating runtime (runc), not %s", a.rt.Name())
		}
	case NetworkAuto:
		if !isolated {
			return nil
		}
	}
	subnet := a.cfg.DefaultSubnet
	if subnet == DefaultSubnetNone {
		subnet = ""
	}
	m, err := network.New(a.netnsDir(), a.cfg.Name, a.cfg.Advertise, subnet)
	if errors.Is(err, network.ErrDefaultSubnet) {
		return fmt.Errorf("nodelet.hcl default_subnet: %w", err)
	}
	if err != nil {
		return err // the advertised address, or the pin directory: named
	}
	m.SetLegacyDir(filepath.Join(a.cfg.StateDir, "netns"))
	if err := CheckReach(a.cfg.RoutedNetworks, a.cfg.ReachFrom, a.cfg.HostPorts); err != nil {
		return err
	}
	if err := m.SetReach(reach(a.cfg)); err != nil {
		return fmt.Errorf("nodelet.hcl routed_networks, reach_from, host_ports: %w", err)
	}
	if err := m.SetPool(max(a.cfg.NetNSPool, 0)); err != nil {
		return fmt.Errorf("nodelet.hcl netns_pool: %w", err)
	}
	a.net = m
	a.specs.feat = session.Features{SessionNet: true, Iface: network.Iface}
	if a.cfg.SSHBinary == "" {
		a.log.Warn("no troupe-ssh: containers get no ssh, hostfiles or session keys", "want", SSHName)
		return nil
	}
	path, create := a.cfg.SessionSecret, false
	if path == "" {
		path, create = filepath.Join(a.cfg.StateDir, "session-secret"), true
	}
	if a.specs.secret, err = sshkey.LoadSecret(path, create); err != nil {
		return err
	}
	a.specs.feat.Tools = true
	return nil
}

// Each container's directory (the runtime's Spec.Dir: bundle, overlay,
// exit file) and session files are in RunDir; its home, which the job
// writes, is in StateDir.
func (a *agent) containersDir() string { return filepath.Join(a.cfg.RunDir, "containers") }
func (a *agent) filesDir() string      { return filepath.Join(a.cfg.RunDir, "files") }
func (a *agent) homesDir() string      { return filepath.Join(a.cfg.StateDir, "homes") }

// netnsDir is where containers' network namespaces are pinned (and
// the pool's, in netns-pool): RunDir, as a namespace never outlives a
// reboot. Nodelets from before RunDir pinned them in StateDir/netns,
// which the network manager still adopts from and sweeps
// (Manager.SetLegacyDir): unlike the OCI runtime's root, which is one
// place for all containers (ociRunDir), a pin is one file per
// container, so new containers are pinned in RunDir at once.
func (a *agent) netnsDir() string { return filepath.Join(a.cfg.RunDir, "netns") }

// legacyDirs are where nodelets from before RunDir kept containers'
// directories and files, and the records before they moved to RunDir:
// leftovers there are removed as the others are.
func (a *agent) legacyDirs() []string {
	return []string{filepath.Join(a.cfg.StateDir, "containers"), filepath.Join(a.cfg.StateDir, "files"), a.recovery.legacyRecordsDir()}
}

// register announces the node, retrying with backoff until schedd
// answers; it fails only when ctx ends.
func (a *registrar) register(ctx context.Context) error {
	reg := api.NodeRegister{
		Name: a.cfg.Name, Addr: a.cfg.Advertise, Runtime: a.rt.Name(), OCIRuntime: a.oci, Instance: a.instance,
		Capacity: api.Resources{CPUMilli: units.MilliCPU(a.cfg.CPU), Memory: a.cfg.Memory, GPU: float64(len(a.gpus))},
	}
	regCli := a.cli
	if a.cfg.JoinTokenFile != "" {
		// Over TCP: the join token registers; the answer is the node's
		// own credential for everything after.
		join, err := auth.ReadSecretFile(a.cfg.JoinTokenFile)
		if err == nil {
			regCli, err = dialSchedd(a.cfg, join, true)
		}
		if err != nil {
			return fmt.Errorf("join token: %w", err)
		}
	}
	b := report.Backoff()
	for {
		sent := fence.Now()
		n, err := regCli.Register(ctx, reg)
		if err == nil {
			if n.Credential != "" {
				a.cli.SetToken(n.Credential)
			}
			a.log.Info("registered", "schedd", a.cfg.Addr, "lease", n.Lease, "heartbeat", n.Heartbeat)
			a.grant(ctx, sent, n.NodeLease)
			return nil
		}
		a.log.Warn("register failed, retrying", "err", err)
		if b.Wait(ctx) != nil {
			return ctx.Err()
		}
	}
}

// heartbeat tells schedd the node lives, as often as schedd asks (its
// node timeout / 8, capped by Config.Heartbeat), and renews the node's
// lease with each answer; a schedd that forgot the node (404) gets a new
// registration. Each carries the health checks' verdict, and a change
// of it is sent at once; so is the first, right after registering, so
// that schedd has the verdict of the check run before it.
func (a *registrar) heartbeat(ctx context.Context) {
	wait := time.Duration(0)
	for {
		t := time.NewTimer(wait)
		wait = a.fence.heartbeatEvery(a.cfg.Heartbeat)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-a.health.changed:
			t.Stop()
		}
		health := a.health.current()
		sent := fence.Now()
		l, err := a.cli.Heartbeat(ctx, a.cfg.Name, api.NodeHeartbeat{Instance: a.instance, Health: &health})
		switch {
		case err == nil:
			a.grant(ctx, sent, l)
		case ctx.Err() != nil:
		case client.IsNotFound(err) || (client.IsUnauthorized(err) && a.cfg.JoinTokenFile != ""):
			a.log.Warn("schedd does not know this node (or its credential), registering again", "err", err)
			_ = a.register(ctx)
		default:
			a.log.Warn("heartbeat failed", "err", err)
		}
	}
}

// grant records a lease schedd granted to a request sent at sent; when
// the lease had run out, the containers that waited for it start now.
func (a *registrar) grant(ctx context.Context, sent time.Duration, l api.NodeLease) {
	if a.fence.grant(sent, l) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.recon.reconcileLocked(ctx)
	}
}

// loop follows the node's assignments with blocking queries until ctx
// ends.
func (a *reconciler) loop(ctx context.Context) {
	var index uint64
	b := report.Backoff()
	for ctx.Err() == nil {
		a.mu.Lock()
		a.queries++
		wait := assignmentsWait
		if len(a.announced) > 0 {
			// Waiting on schedd to take an announcement: ask again
			// soon, the stop (or adoption) follows from the answer.
			wait = announceWait
		}
		a.mu.Unlock()
		as, err := a.cli.Assignments(ctx, a.cfg.Name, index, wait)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Warn("assignments query failed", "err", err)
			_ = b.Wait(ctx)
			continue
		}
		b.Reset()
		if as.Index < index {
			a.log.Info("schedd index went back, resyncing", "was", index, "now", as.Index)
		}
		a.reconcile(ctx, as)
		if as.Index == 0 || as.Index == index {
			_ = b.Wait(ctx) // a schedd without blocking queries: do not spin
		}
		index = as.Index
	}
}
