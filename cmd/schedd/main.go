// Command schedd is troupe's queue controller. With --dev it also starts
// nodelets on this machine: a whole cluster in one command.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/troupe-hpc/troupe/accounting"
	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/backoff"
	"github.com/troupe-hpc/troupe/internal/catalog"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/connlimit"
	"github.com/troupe-hpc/troupe/internal/fdlimit"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/sched"
	"github.com/troupe-hpc/troupe/sched/config"
	"github.com/troupe-hpc/troupe/sched/httpapi"
	"github.com/troupe-hpc/troupe/sched/raftlog"
	"github.com/troupe-hpc/troupe/sched/web"
)

type options struct {
	dataDir     string
	socket      string
	listen      string
	dev         bool
	nodes       int
	nodeCPU     float64
	nodeMem     string
	fakeGPUs    int
	runtime     string
	stopGrace   time.Duration
	runDir      string
	verbose     bool
	parts       string
	images      string
	devHosts    string
	nodeTO      time.Duration
	adminGrp    string
	tlsCert     string
	tlsKey      string
	insecure    bool
	joinFile    string
	raftAddr    string
	peerCA      string
	peers       string
	id          string
	apiAddr     string
	join        string
	metrics     string
	web         string
	webTLS      bool
	config      string
	maxInput    byteSize
	maxQueued   int
	maxTotal    int // --max-queued: all users together
	maxBytes    queuedBytes
	keepEnded   age
	acctDrv     string
	acctDSN     string
	acctKeep    age
	streamsJob  int // --max-streams-per-job
	streamsUser int // --max-streams-per-user
	streams     int // --max-streams: all users together
	fdReserve   int
}

// age is a flag of a duration that may be in days ("365d").
type age time.Duration

func (a *age) String() string { return time.Duration(*a).String() }

func (a *age) Set(s string) error {
	d, err := config.ParseAge(s)
	*a = age(d)
	return err
}

// byteSize is a flag of bytes: a number, or a size with a unit ("64KiB").
type byteSize int

func (b *byteSize) String() string { return strconv.Itoa(int(*b)) }

func (b *byteSize) Set(s string) error {
	n, err := jobspec.ParseMemory(s)
	if err != nil || n <= 0 || n > sched.MaxJobInputLimit {
		return fmt.Errorf("want a size from 1 byte to %d bytes, such as 64KiB", sched.MaxJobInputLimit)
	}
	*b = byteSize(n)
	return nil
}

// queuedBytes is --max-queued-input-per-user: bytes, a number or a size
// with a unit ("64MiB"); 0 is unlimited.
type queuedBytes int

func (b *queuedBytes) String() string { return strconv.Itoa(int(*b)) }

func (b *queuedBytes) Set(s string) error {
	n, err := jobspec.ParseMemory(s)
	if s == "0" {
		n, err = 0, nil
	}
	if err != nil || n < 0 || int64(int(n)) != n {
		return errors.New("want a size such as 64MiB, or 0 (unlimited)")
	}
	*b = queuedBytes(n)
	return nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "schedd: %v\n", err)
		return 2
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, o, log, stdout); err != nil {
		fmt.Fprintf(stderr, "schedd: %v\n", err)
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("schedd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: schedd [flags]

troupe's queue controller: keeps the queue in a raft log on disk, schedules
gangs of containers, and serves the /v1 API on a unix socket (and TCP).

  schedd --dev --data-dir /tmp/troupe --nodes 2   # controller + 2 local nodelets

flags:
`)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.dataDir, "data-dir", "/var/lib/troupe/schedd", "raft log, snapshots and the dev cluster's node state")
	fs.StringVar(&o.socket, "socket", "", "unix socket to serve on (default /run/troupe/schedd.sock; DATA-DIR/schedd.sock with --dev)")
	fs.StringVar(&o.listen, "listen", "", "also serve the API on this TCP address, e.g. 127.0.0.1:7946")
	fs.BoolVar(&o.dev, "dev", false, "run a development cluster: this controller plus --nodes nodelets on this machine")
	fs.IntVar(&o.nodes, "nodes", 2, "nodelets to start with --dev")
	fs.Float64Var(&o.nodeCPU, "node-cpu", 0, "CPUs each dev nodelet offers (default: this machine's)")
	fs.StringVar(&o.nodeMem, "node-memory", "", "memory each dev nodelet offers, e.g. 8GiB (default: this machine's)")
	fs.IntVar(&o.fakeGPUs, "fake-gpus", 0, "fake GPUs each dev nodelet offers (nodelet --fake-gpus), to try gpu jobs without one (default: the node's own)")
	fs.StringVar(&o.runtime, "runtime", "auto", "dev nodelets' runtime: auto, runc or process")
	fs.DurationVar(&o.stopGrace, "stop-grace", 10*time.Second, "dev nodelets: time between SIGTERM and SIGKILL when a container is stopped")
	fs.StringVar(&o.runDir, "dev-run-dir", "", "dev nodelets' run directories: `dir`/NAME each, best on a tmpfs (default: DATA-DIR/nodes/NAME/run)")
	fs.StringVar(&o.images, "images", "", "image catalog `file` (see etc/images.hcl): a job naming an image it lacks is refused;\nwith --dev the nodelets resolve names in it too")
	fs.StringVar(&o.parts, "partitions", "", "partitions `file` (see troupe-partitions(5)), re-read on badmin reconfig\n(default: one partition, \"default\", of every node)")
	fs.StringVar(&o.devHosts, "dev-hosts", "auto", "where dev nodelets run: netns (each in its own network namespace, a test host),\nshared (this machine's network) or auto (netns when root with runc)")
	fs.DurationVar(&o.nodeTO, "node-timeout", sched.DefaultNodeTimeout, "mark a node DOWN when silent this long; its jobs end NODE_FAIL or are requeued")
	fs.StringVar(&o.adminGrp, "admin-group", "", "`group` whose members administer schedd as root does (see all jobs in full, kill any)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "TLS certificate `file` (PEM) for --listen; with --dev a self-signed pair is made in DATA-DIR/tls when omitted")
	fs.StringVar(&o.tlsKey, "tls-key", "", "TLS private key `file` (PEM) for --tls-cert")
	fs.BoolVar(&o.insecure, "insecure-tcp", false, "DEV ONLY: serve --listen as plain HTTP, trusting callers without a token as root")
	fs.StringVar(&o.joinFile, "join-token-file", "", "cluster join token `file` nodelets register with over TCP; made (0600) when missing\n(default DATA-DIR/join-token)")
	fs.StringVar(&o.raftAddr, "raft-addr", "", "HOST:PORT raft listens on for its peers (HA; with --peers)")
	fs.StringVar(&o.peerCA, "peer-ca", "", "HA: the cluster CA `file` (PEM) raft peers authenticate each other with (mutual TLS; each peer\npresents --tls-cert); default --tls-cert itself, for peers that share one certificate and key")
	fs.StringVar(&o.peers, "peers", "", "the HA cluster's raft servers, this one included: a `list` of id=host:port, comma-separated")
	fs.StringVar(&o.join, "join", "", "HA: join the running cluster at this API `address` (with --raft-addr and --id; an admin token in TROUPE_TOKEN)")
	fs.StringVar(&o.id, "id", "", "this server's raft id among --peers (default: the peer whose address is --raft-addr)")
	fs.StringVar(&o.apiAddr, "advertise", "", "`URL` peers send clients to when this server leads (default https://LISTEN, http:// with --insecure-tcp)")
	fs.StringVar(&o.metrics, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (plain HTTP, apart from the API), e.g. 127.0.0.1:9100 (default: off)")
	fs.StringVar(&o.web, "web-addr", "", "serve the web page of the queue, nodes, partitions and fair share at http://ADDR/, e.g. 127.0.0.1:8080\n(default: off); users who log in with a token submit, control and attach to their jobs there")
	fs.BoolVar(&o.webTLS, "web-tls", false, "serve --web-addr over TLS with --tls-cert and --tls-key (https://ADDR/; the session cookie is Secure)")
	o.maxInput = jobspec.DefaultMaxInput
	fs.Var(&o.maxInput, "max-job-input", "the most `bytes` of text (commands, environment, mounts, paths) one job may hold, e.g. 64KiB;\na larger job is refused at submit")
	fs.IntVar(&o.maxTotal, "max-queued", 0, "the most jobs all users together may have PENDING or HELD; more are refused at submit (0: unlimited)")
	fs.IntVar(&o.maxQueued, "max-queued-per-user", sched.DefaultMaxQueuedPerUser, "the most jobs one user may have PENDING or HELD; more are refused at submit (0: unlimited)")
	o.maxBytes = sched.DefaultMaxQueuedInputPerUser
	fs.Var(&o.maxBytes, "max-queued-input-per-user", "the most `bytes` of job text (as --max-job-input counts it) one user's PENDING and HELD jobs\nmay hold together, e.g. 64MiB; a job past it is refused at submit (0: unlimited)")
	o.keepEnded = age(sched.DefaultKeepEnded)
	fs.Var(&o.keepEnded, "keep-ended", "how long an ended job stays in the replicated state before it lives in the accounting\nstore only (bhist and bacct read both), e.g. 5m")
	fs.StringVar(&o.acctDrv, "accounting-driver", "sqlite", "the accounting store: sqlite (a file, DATA-DIR/accounting.db) or postgres\n(one database every HA server shares; --accounting-dsn)")
	fs.StringVar(&o.acctDSN, "accounting-dsn", "", "the accounting store's data source: the SQLite file (default DATA-DIR/accounting.db),\nor PostgreSQL's postgres://user@host/db (the password from ~/.pgpass or PGPASSWORD)")
	fs.Var(&o.acctKeep, "accounting-keep", "delete accounting records this long after their job ended, e.g. 365d (default: keep forever)")
	fs.IntVar(&o.streamsJob, "max-streams-per-job", 0, "the most terminal (attach) and upgraded /apps streams one job may have open at once; more are\nrefused with 429 (0: the default, "+strconv.Itoa(connlimit.DefaultPerJob)+"; -1: unlimited)")
	fs.IntVar(&o.streamsUser, "max-streams-per-user", 0, "the most terminal (attach) and upgraded /apps streams one user may have open at once; more are\nrefused with 429 (0: the default, "+strconv.Itoa(connlimit.DefaultPerUser)+"; -1: unlimited)")
	fs.IntVar(&o.streams, "max-streams", 0, "the most terminal and /apps streams all users together may have open at once (0: a quarter\nof what the limit of open files leaves beyond --fd-reserve)")
	fs.IntVar(&o.fdReserve, "fd-reserve", 0, "open files kept for the nodes' traffic (heartbeats, reports, assignments): past the limit\nless this, other requests are refused (503) and idle user connections closed (0: an eighth\nof the limit of open files, at least 64)")
	fs.BoolVar(&o.verbose, "v", false, "log debug detail")
	fs.StringVar(&o.config, "config", "", "settings `file` (see etc/schedd.hcl): each key one of these flags, data_dir for --data-dir;\nflags given here override it")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q (see schedd -h)", fs.Arg(0))
	}
	if o.config != "" {
		if err := applyConfig(fs, o.config); err != nil {
			return o, err
		}
	}
	switch o.devHosts {
	case "auto", "netns", "shared":
	default:
		return o, fmt.Errorf("--dev-hosts %q: want auto, netns or shared", o.devHosts)
	}
	if o.maxQueued < 0 {
		return o, fmt.Errorf("--max-queued-per-user must be 0 (unlimited) or more, got %d", o.maxQueued)
	}
	if o.maxTotal < 0 {
		return o, fmt.Errorf("--max-queued must be 0 (unlimited) or more, got %d", o.maxTotal)
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"max-streams-per-job", o.streamsJob}, {"max-streams-per-user", o.streamsUser}} {
		if f.n < -1 {
			return o, fmt.Errorf("--%s must be 0 (the default), -1 (unlimited) or more, got %d", f.name, f.n)
		}
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"max-streams", o.streams}, {"fd-reserve", o.fdReserve}} {
		if f.n < 0 {
			return o, fmt.Errorf("--%s must be 0 (the default) or more, got %d", f.name, f.n)
		}
	}
	switch {
	case o.fakeGPUs < 0:
		return o, fmt.Errorf("--fake-gpus must be 0 or more, got %d", o.fakeGPUs)
	case o.fakeGPUs > 0 && !o.dev:
		return o, errors.New("--fake-gpus goes with --dev: it gives the dev nodelets fake GPUs (a real node's nodelet takes nodelet --fake-gpus)")
	case o.runDir != "" && !o.dev:
		return o, errors.New("--dev-run-dir goes with --dev: it places the dev nodelets' run directories (a real node's nodelet takes nodelet --run-dir)")
	}
	if o.runDir != "" {
		abs, err := filepath.Abs(o.runDir)
		if err != nil {
			return o, fmt.Errorf("--dev-run-dir: %w", err)
		}
		o.runDir = abs
	}
	if o.dev && o.nodes < 1 {
		return o, fmt.Errorf("--nodes must be at least 1, got %d", o.nodes)
	}
	if o.socket == "" {
		o.socket = "/run/troupe/schedd.sock"
		if o.dev {
			o.socket = filepath.Join(o.dataDir, "schedd.sock")
		}
	}
	abs, err := filepath.Abs(o.socket)
	if err != nil {
		return o, err
	}
	o.socket = abs
	if o.webTLS && (o.web == "" || o.tlsCert == "") {
		return o, errors.New("--web-tls needs --web-addr and --tls-cert with --tls-key")
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return o, errors.New("--tls-cert and --tls-key go together")
	}
	if o.listen != "" && o.tlsCert == "" && !o.insecure && !o.dev {
		return o, errors.New("--listen needs TLS (--tls-cert and --tls-key); plain TCP is not trusted: add --insecure-tcp for a dev cluster only")
	}
	ha := o.peers != "" || o.join != ""
	switch {
	case o.peers != "" && o.join != "":
		return o, errors.New("--peers bootstraps a new cluster, --join enters a running one: give one")
	case ha != (o.raftAddr != ""):
		return o, errors.New("--raft-addr goes with --peers or --join")
	case ha && o.listen == "":
		return o, errors.New("--peers and --join need --listen: followers send clients to the leader's TCP address")
	case o.join != "" && o.id == "":
		return o, errors.New("--join needs --id, this server's raft id")
	case ha && o.tlsCert == "" && !o.insecure:
		return o, errors.New("--peers and --join need --tls-cert and --tls-key: the raft peers authenticate each other with them (mutual TLS, see --peer-ca)")
	case o.peerCA != "" && !ha:
		return o, errors.New("--peer-ca goes with --peers or --join")
	}
	if o.joinFile == "" {
		o.joinFile = filepath.Join(o.dataDir, "join-token")
	}
	for _, p := range []*string{&o.parts, &o.images, &o.tlsCert, &o.tlsKey, &o.joinFile, &o.peerCA} {
		if *p != "" {
			if *p, err = filepath.Abs(*p); err != nil {
				return o, err
			}
		}
	}
	return o, nil
}

// applyConfig sets the flags the command line left unset from the
// schedd.hcl at path.
func applyConfig(fs *flag.FlagSet, path string) error {
	f, err := config.Load(path)
	if err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for _, s := range config.Settings {
		v, ok := f.Flags[s.Flag]
		if !ok || given[s.Flag] {
			continue
		}
		if err := fs.Set(s.Flag, v); err != nil {
			return fmt.Errorf("%s: %s: %w", f.Describe(s.Flag), s.Key, err)
		}
	}
	return nil
}

func serve(ctx context.Context, o options, log *slog.Logger, stdout io.Writer) error {
	// Each node holds a connection (its blocking query) and, busy, up to
	// two more: 10,000 nodes need some 10,000-30,000 open files. The
	// limit got is in the "schedd serving" line.
	nofile, hard, ferr := fdlimit.Raise()
	if ferr != nil {
		log.Warn("raising the limit of open files to the hard limit", "soft", nofile, "hard", hard, "err", ferr)
	}
	var images *catalog.Catalog
	if o.images != "" {
		var err error
		if images, err = catalog.Load(o.images); err != nil {
			return err
		}
	}
	var (
		join string
		err  error
	)
	if o.listen != "" {
		if join, err = auth.JoinToken(o.joinFile); err != nil {
			return fmt.Errorf("--join-token-file: %w", err)
		}
	}
	if o.listen != "" && o.tlsCert == "" && !o.insecure {
		// --dev: a self-signed pair the clients trust with TROUPE_CA.
		if o.tlsCert, o.tlsKey, err = auth.SelfSigned(filepath.Join(o.dataDir, "tls"), nil); err != nil {
			return err
		}
		log.Info("made a self-signed TLS certificate", "cert", o.tlsCert)
	}
	if o.apiAddr == "" && o.listen != "" {
		o.apiAddr = "https://" + o.listen
		if o.insecure {
			o.apiAddr = "http://" + o.listen
		}
	}
	if o.dev {
		if err := devDataDir(o, log); err != nil {
			return err
		}
	}
	rc, err := raftConfig(o)
	if err != nil {
		return err
	}
	if rc.Bind != "" {
		if o.tlsCert != "" {
			if rc.TLS, err = raftlog.PeerTLS(o.peerCA, o.tlsCert, o.tlsKey); err != nil {
				return err
			}
		} else {
			log.Warn("raft peers talk in the clear, unauthenticated (--insecure-tcp): anyone who reaches --raft-addr can rewrite the state; dev clusters only", "raft_addr", o.raftAddr)
		}
	}
	srv, err := sched.Open(ctx, sched.Config{DataDir: filepath.Join(o.dataDir, "raft"), Logger: log,
		PartitionsFile: o.parts, Images: images, NodeTimeout: o.nodeTO, JoinToken: join, Raft: rc, APIAddr: o.apiAddr,
		MaxJobInput: int(o.maxInput), MaxQueuedPerUser: queuedLimit(o.maxQueued), MaxQueued: o.maxTotal,
		MaxQueuedInputPerUser: queuedLimit(int(o.maxBytes)),
		KeepEnded:             time.Duration(o.keepEnded), AccountingDriver: o.acctDrv, AccountingPath: accountingPath(o), AccountingDSN: o.acctDSN,
		AccountingKeep: time.Duration(o.acctKeep), MaxStreamsPerJob: o.streamsJob, MaxStreamsPerUser: o.streamsUser,
		MaxStreams: o.streams, FDReserve: o.fdReserve})
	if err != nil {
		return err
	}
	defer srv.Close()
	if o.metrics != "" {
		mctx, stopMetrics := context.WithCancel(context.Background())
		defer stopMetrics()
		maddr, err := srv.ServeMetrics(mctx, o.metrics, log)
		if err != nil {
			return err
		}
		log.Info("serving metrics", "addr", "http://"+maddr.String()+"/metrics")
	}
	// Users' connections never take the open files the nodes' traffic
	// needs: every listener's connections are counted together, and the
	// last --fd-reserve kept for the nodes (connlimit.Guard).
	guard := connlimit.NewGuard(o.fdReserve)
	guard.Shed = shedLog(log)
	if o.web != "" {
		wctx, stopWeb := context.WithCancel(context.Background())
		defer stopWeb()
		cert, key, scheme := "", "", "http://"
		if o.webTLS {
			cert, key, scheme = o.tlsCert, o.tlsKey, "https://"
		}
		waddr, err := web.Serve(wctx, o.web, cert, key, web.Handler(srv, webOutput(o, log)), guard, log.Warn)
		if err != nil {
			return err
		}
		log.Info("serving the web page", "addr", scheme+waddr.String()+"/")
	}
	lns, err := listen(o)
	if err != nil {
		return err
	}
	for i := range lns {
		lns[i] = guard.Listen(lns[i])
	}
	if dir, mode := unreachable(o.socket); dir != "" {
		log.Warn("OTHER USERS CANNOT REACH THE SOCKET: a directory on its path gives them no search permission; "+
			"make it 0711 or 0755, or serve --socket from a directory they can reach",
			"socket", o.socket, "dir", dir, "mode", fmt.Sprintf("%04o", mode))
	}
	adminGID := -1
	if o.adminGrp != "" {
		if adminGID, err = auth.GroupID(o.adminGrp); err != nil {
			return fmt.Errorf("--admin-group %q: %w", o.adminGrp, err)
		}
	}
	// Unix-socket callers are who the kernel says (SO_PEERCRED).
	peer := auth.PeerCreds(adminGID)
	hs := &http.Server{Handler: httpapi.ConnGuard(guard, srv.CatchUpGate(srv.Handler())), ReadHeaderTimeout: 10 * time.Second,
		ConnState: guard.ConnState, ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return peer(guard.ConnContext(ctx, c), c)
		}}
	go func() {
		if err := hs.Serve(lns[0]); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serving", "addr", lns[0].Addr(), "err", err)
		}
	}()
	// TCP callers are who their bearer token says; over TLS unless the
	// dev-only --insecure-tcp.
	ts := &http.Server{Handler: httpapi.ConnGuard(guard, srv.TCPHandler(o.insecure)), ReadHeaderTimeout: 10 * time.Second,
		ConnState: guard.ConnState, ConnContext: guard.ConnContext}
	if len(lns) > 1 {
		go func() {
			var err error
			if o.tlsCert != "" {
				err = ts.ServeTLS(lns[1], o.tlsCert, o.tlsKey)
			} else {
				err = ts.Serve(lns[1])
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("serving", "addr", lns[1].Addr(), "err", err)
			}
		}()
	}
	if o.join != "" {
		go joinCluster(ctx, o, log)
	}
	loopDone := make(chan struct{})
	loopCtx, stopLoop := context.WithCancel(context.Background())
	go func() {
		srv.Run(loopCtx)
		close(loopDone)
	}()
	addr := "unix://" + o.socket
	log.Info("schedd serving", "addr", addr, "tcp", o.listen, "tls", o.tlsCert != "", "data_dir", o.dataDir, "partitions", o.parts, "nofile", nofile)

	var cluster *devCluster
	if o.dev {
		cluster, err = startDev(ctx, o, addr, srv, log)
		if err == nil {
			fmt.Fprintf(stdout, "troupe dev cluster is up: %d nodes.\nexport TROUPE_ADDR=%s\n", o.nodes, addr)
		}
	} else {
		fmt.Fprintf(stdout, "export TROUPE_ADDR=%s\n", addr)
	}
	if err == nil {
		select {
		case <-ctx.Done():
			log.Info("shutting down")
		case <-srv.Failed():
			err = srv.Err()
			log.Error("stopping: the raft log is damaged", "err", err)
		}
	}
	// Nodelets go first: they stop their containers and report while the
	// controller still listens.
	if cluster != nil {
		cluster.stop(o.stopGrace + 10*time.Second)
	}
	stopLoop()
	<-loopDone
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	_ = ts.Shutdown(sctx)
	os.Remove(o.socket)
	return err
}

// webOutput is how the web page follows jobs' output: bpeek, from
// schedd's own directory, over the socket.
func webOutput(o options, log *slog.Logger) web.Output {
	exe, err := os.Executable()
	if err == nil {
		bpeek := filepath.Join(filepath.Dir(exe), "bpeek")
		if fi, err := os.Stat(bpeek); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return web.Output{Bpeek: bpeek, Addr: "unix://" + o.socket}
		}
	}
	log.Warn("the web page cannot follow jobs' output: no bpeek next to schedd", "dir", filepath.Dir(exe))
	return web.Output{}
}

// accountingPath is the SQLite store's file: --accounting-dsn, else
// accounting.db in the data dir.
func accountingPath(o options) string {
	if o.acctDSN != "" && o.acctDrv != "postgres" {
		return o.acctDSN
	}
	return filepath.Join(o.dataDir, accounting.FileName)
}

// devDataDir makes the dev cluster's data dir, where its socket lives
// (DATA-DIR/schedd.sock), passable by other users: created 0711, or, when
// it exists without search permission for others (mktemp -d makes 0700),
// given it, with a warning. Its contents keep their own modes (the raft
// log 0700, the join token and keys 0600), and others cannot list it.
func devDataDir(o options, log *slog.Logger) error {
	if err := os.MkdirAll(o.dataDir, 0o711); err != nil {
		return err
	}
	if filepath.Dir(o.socket) != filepath.Clean(o.dataDir) {
		return nil
	}
	fi, err := os.Stat(o.dataDir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if mode := fi.Mode().Perm(); mode&0o001 == 0 && ok && int(st.Uid) == os.Geteuid() {
		if err := os.Chmod(o.dataDir, mode|0o011); err != nil {
			return err
		}
		log.Warn("--dev: gave other users search permission on the data dir, so that they reach the socket in it",
			"data_dir", o.dataDir, "was", fmt.Sprintf("%04o", mode), "now", fmt.Sprintf("%04o", mode|0o011))
	}
	return nil
}

// unreachable returns the first directory on sock's path that others
// (not its owner, not its group) may not pass, with its mode; "" when
// every one lets them.
func unreachable(sock string) (string, os.FileMode) {
	for d := filepath.Dir(sock); ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			return d, fi.Mode().Perm()
		}
		if d == "/" || d == "." {
			return "", 0
		}
	}
}

// queuedLimit turns --max-queued-per-user or --max-queued-input-per-user
// (0: unlimited) into sched.Config's (negative: unlimited).
func queuedLimit(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

func listen(o options) ([]net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(o.socket), 0o755); err != nil {
		return nil, err
	}
	if c, err := net.Dial("unix", o.socket); err == nil {
		c.Close()
		return nil, fmt.Errorf("another schedd already serves %s", o.socket)
	}
	os.Remove(o.socket)
	ul, err := net.Listen("unix", o.socket)
	if err != nil {
		return nil, err
	}
	// Local users reach the socket; identity checks come from peer
	// credentials (docs/security.md).
	if err := os.Chmod(o.socket, 0o666); err != nil {
		ul.Close()
		return nil, err
	}
	lns := []net.Listener{ul}
	if o.listen != "" {
		tl, err := net.Listen("tcp", o.listen)
		if err != nil {
			ul.Close()
			return nil, err
		}
		lns = append(lns, tl)
	}
	return lns, nil
}

// raftConfig turns --raft-addr, --peers and --id into raft's setup.
func raftConfig(o options) (raftlog.Config, error) {
	var rc raftlog.Config
	if o.join != "" {
		return raftlog.Config{Bind: o.raftAddr, ID: o.id, Join: true}, nil
	}
	if o.peers == "" {
		return rc, nil
	}
	rc.Bind = o.raftAddr
	for _, p := range strings.Split(o.peers, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || id == "" || addr == "" {
			return rc, fmt.Errorf("--peers %q: want id=host:port,…", o.peers)
		}
		rc.Peers = append(rc.Peers, raftlog.Peer{ID: id, Addr: addr})
		if o.id == "" && addr == o.raftAddr {
			rc.ID = id
		}
	}
	if o.id != "" {
		rc.ID = o.id
	}
	if rc.ID == "" {
		return rc, fmt.Errorf("--peers names no server at --raft-addr %s; give --id", o.raftAddr)
	}
	return rc, nil
}

// joinCluster asks the cluster at --join to add this server, retrying
// until it is added or ctx ends (the leader may be in an election).
func joinCluster(ctx context.Context, o options, log *slog.Logger) {
	c, err := client.New(o.join)
	if err != nil {
		log.Error("--join", "err", err)
		return
	}
	for {
		err := c.RaftJoin(ctx, api.RaftJoin{ID: o.id, Addr: o.raftAddr})
		if err == nil {
			log.Info("joined the raft cluster", "via", o.join, "id", o.id)
			return
		}
		log.Warn("joining the raft cluster, retrying", "via", o.join, "err", err)
		if backoff.Sleep(ctx, time.Second) != nil {
			return
		}
	}
}

// shedLog reports the idle user connections the guard closed: at most
// one line every 10 seconds, with the count since the last.
func shedLog(log *slog.Logger) func(n, open int) {
	var (
		mu     sync.Mutex
		last   time.Time
		closed int
	)
	return func(n, open int) {
		mu.Lock()
		defer mu.Unlock()
		closed += n
		if time.Since(last) < 10*time.Second {
			return
		}
		log.Warn("near the limit of open files: closed idle user connections to keep the nodes' reserve",
			"closed", closed, "open", open, "nofile", connlimit.NoFile())
		last, closed = time.Now(), 0
	}
}
