# troupe — see README.md. `make demo` and `make test` are the two commands
# a newcomer needs.

GO       ?= go
BIN      := bin
CMDS     := $(notdir $(patsubst %/,%,$(wildcard cmd/*/)))
STATICCHECK_VERSION := v0.8.2
TEST_FLAGS ?= -timeout 30m

.PHONY: all build slurm-links install deps demo test chaos fuzz lint clean bench-scale bench-reads bench-pipeline runc-linked bench-sessions upgrade-test

all: build

# Static binaries: troupe-init and troupe-ssh are mounted into containers
# whatever their libc, and the tools copy cleanly onto any node. nodelet
# is built with cgo so that go-nvml can load the NVIDIA driver's
# libnvidia-ml where there is one (without it, the node reports no GPUs),
# and so that it can drive containers in-process with runc's libcontainer
# (--oci-runtime libcontainer), whose container init needs cgo and whose
# seccomp filters need libseccomp (the seccomp tag, where its headers are
# installed: libseccomp-dev; without them that mode says so and auto
# leaves it out). runc_nocriu leaves libcontainer's checkpoint/restore
# (go-criu and protobuf) out: troupe never checkpoints, and every
# container's init is the nodelet binary re-executed, which starts
# faster without them (docs/pipeline.md, "No checkpoint/restore in the
# binary").
STATIC   := $(filter-out nodelet,$(CMDS))
SECCOMP_TAG  := $(shell pkg-config --exists libseccomp 2>/dev/null && echo seccomp)
NODELET_TAGS ?= $(SECCOMP_TAG) runc_nocriu
# The Go linker writes a binary through a memory map, which leaves the
# file in the page cache in small pages: every process started from it
# then faults its text in a few pages at a time, until those pages are
# evicted. The same bytes written in large write(2) calls are cached in
# large folios, and each start of the program costs less CPU: about 1 ms
# a run of bsub on the development machine, a quarter of its CPU, with
# 80 fewer page faults (docs/pipeline.md, One bsub per job). build and
# runc-linked rewrite their outputs so (dd, one 64 MiB write at a time).
REWRITE = for f in $(1); do dd if="$$f" of="$$f.tmp" bs=64M status=none && chmod --reference="$$f" "$$f.tmp" && mv -f "$$f.tmp" "$$f" || exit 1; done
build:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ $(addprefix ./cmd/,$(STATIC))
	CGO_ENABLED=1 $(GO) build -trimpath -tags '$(NODELET_TAGS)' -o $(BIN)/ ./cmd/nodelet
	@$(call REWRITE,$(addprefix $(BIN)/,$(CMDS)))
	@$(MAKE) --no-print-directory slurm-links

# Slurm's commands are links to troupe-slurm (which acts as the command
# it is called as) in a directory of their own, which users who want
# them put first on PATH, as Slurm's Torque wrappers are installed: never
# in bin/, where they would shadow a real Slurm's sbatch on the same
# machine. SLURM_CMDS is troupe-slurm --list (cmd/troupe-slurm checks).
SLURM_CMDS := sacct sbatch scancel scontrol sinfo squeue srun
SLURM_DIR  ?= libexec/troupe/slurm
SLURM_BIN  ?= $(abspath $(BIN))/troupe-slurm
slurm-links:
	@mkdir -p $(SLURM_DIR)
	@for c in $(SLURM_CMDS); do ln -sfn $(SLURM_BIN) $(SLURM_DIR)/$$c; done

# Installs the binaries in $(DESTDIR)$(PREFIX)/bin, Slurm's commands as
# links in $(PREFIX)/libexec/troupe/slurm and the manual pages.
PREFIX  ?= /usr/local
DESTDIR ?=
install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 0755 $(addprefix $(BIN)/,$(CMDS)) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 man/*.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	install -m 0644 man/*.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	@$(MAKE) --no-print-directory slurm-links SLURM_DIR=$(DESTDIR)$(PREFIX)/libexec/troupe/slurm SLURM_BIN=../../../bin/troupe-slurm

# System packages the runtime and the tests need (runc, iproute2, groff…);
# installs only what is missing, and only as root.
deps:
	@contrib/dev/install-deps

demo: build deps
	@contrib/dev/demo

# Every test (the end-to-end ones build the binaries themselves and run
# real clusters), then each fuzz target briefly: the parsers of everything
# users and nodes send must not panic or hang. bsim's trace tests replay
# workload traces of the Parallel Workloads Archive, which the repository
# does not hold: TROUPE_TRACES names the directory that does (by default
# a traces directory beside the checkout, where there is one); without
# one they skip, saying so.
TROUPE_TRACES ?= $(abspath $(wildcard ../shared/traces))
test: build deps
	TROUPE_TRACES='$(TROUPE_TRACES)' $(GO) test -tags '$(NODELET_TAGS)' $(TEST_FLAGS) ./...
	@$(MAKE) --no-print-directory fuzz

# The fault-injection test in full (e2e/chaos_test.go): three schedd
# peers in network namespaces under five faults (leader isolated, leader
# SIGSTOPped, follower kill -9 and restart, flapping link, one-way loss)
# with concurrent clients, the history checked with porcupine. `make
# test` runs two of the faults. Needs root. CHAOS_FLAGS adds
# settings such as TROUPE_CHAOS_READS=1.
CHAOS_FLAGS ?=
chaos: build deps
	TROUPE_CHAOS=full $(CHAOS_FLAGS) $(GO) test -count=1 -v -timeout 15m -run '^TestChaos$$' ./e2e/

# The rolling-upgrade test (e2e/upgrade_test.go) alone: three schedd
# peers and two runc nodelets of the previous release, running jobs, are
# upgraded to this tree one at a time under a client's submits and reads
# (schedd(8), UPGRADES). The previous release is built from this clone's
# history (`git archive`; a shallow clone lacks it and the test skips);
# UPGRADE_FROM names another commit. `make test` runs it too. Needs root
# and runc.
UPGRADE_FROM ?=
upgrade-test: deps
	TROUPE_UPGRADE_FROM=$(UPGRADE_FROM) $(GO) test -tags '$(NODELET_TAGS)' -count=1 -v -timeout 15m -run '^TestRollingUpgrade$$' ./e2e/

# Each native fuzz target for FUZZTIME (its seed corpus runs in `go test`).
# A count, not a duration: Go 1.26's fuzz coordinator can fail a target
# with a bare "context deadline exceeded" when a -fuzztime duration ends
# while a worker is mid-input (golang/go#75804, fixed in Go 1.27); a
# count has no deadline to race. 20000 inputs take 2-10 s per target.
FUZZTIME ?= 20000x
FUZZ     := ./jobspec:FuzzParse ./sched/partition:FuzzParse ./sim/swf:FuzzRead \
	./sched:FuzzSubmitBody ./sched:FuzzReportBody ./sched:FuzzRegisterBody \
	./internal/api:FuzzParseDependency ./jobspec/script:FuzzParse
fuzz:
	@set -e; for t in $(FUZZ); do \
		echo "fuzz $${t%%:*} $${t##*:} ($(FUZZTIME))"; \
		out=$$($(GO) test -run '^$$' -fuzz "^$${t##*:}$$" -fuzztime $(FUZZTIME) "$${t%%:*}" 2>&1) || { echo "$$out"; exit 1; }; \
	done

# The scale benchmark (docs/scale.md): schedd and NODES simulated nodes
# (troupe-nodesim(8)) on this machine; prints registration time, schedd's
# idle CPU and memory, and the end-to-end throughput of BENCH_JOBS
# 1-container jobs and BENCH_GANGS gangs of 8-64 containers, 1 s each.
# It takes minutes; each node holds up to three connections, so 10,000
# nodes want `ulimit -Hn` of about 30,000 (it refuses below 11,024; it
# raises the soft limit itself). PEERS=3 runs three schedd raft peers
# over https, the nodes following the leader. BENCH_HISTORY synthetic
# ended jobs are put in schedd's accounting store before it starts (a
# long history must not slow it); BENCH_QUEUED jobs wait for Resources
# before the throughput runs (a backlog: schedd's memory, its scheduling
# pass and bqueue's latency with it). BENCH_BIN=dir takes prebuilt schedd
# and troupe-nodesim from dir; contrib/dev/bench-scale-remote builds them
# and the test binary, and runs the 10,000-node figures where Go is not.
NODES         ?= 10000
BENCH_JOBS    ?= 2000
BENCH_GANGS   ?= 200
BENCH_HISTORY ?= 0
BENCH_QUEUED  ?= 0
PEERS         ?= 1
bench-scale:
	NODES=$(NODES) BENCH_JOBS=$(BENCH_JOBS) BENCH_GANGS=$(BENCH_GANGS) BENCH_HISTORY=$(BENCH_HISTORY) \
		BENCH_QUEUED=$(BENCH_QUEUED) PEERS=$(PEERS) \
		$(GO) test -count=1 -run '^$$' -bench '^BenchmarkScale$$' -benchtime 1x -v -timeout 60m ./cmd/troupe-nodesim/

# The reads benchmark (docs/scale.md, "Reads at scale"): one element of
# a 100,000-element array (running, and in the accounting store) and a
# user's few jobs among them, through the real tools (bjob, bhist -l,
# sacct -j, bqueue -u, bjobs). BENCH_BIN=dir times another build's
# binaries (schedd, troupe-nodesim and the tools) for a before/after.
BENCH_ELEMENTS ?= 100000
BENCH_CALLS    ?= 10
bench-reads:
	BENCH_ELEMENTS=$(BENCH_ELEMENTS) BENCH_CALLS=$(BENCH_CALLS) \
		$(GO) test -count=1 -run '^$$' -bench '^BenchmarkReads$$' -benchtime 1x -v -timeout 60m ./cmd/troupe-nodesim/

# The pipeline benchmark (docs/pipeline.md): N one-container jobs
# through `schedd --dev --nodes 1` beside `runc run` of the same rootfs
# two at a time, with the installed runc and with runc built at the
# version of libcontainer the nodelet links (bin/runc-linked, from the
# module cache); prints the rates, the ratios, the stages' p50/p90
# (troupe_job_stage_seconds), the slot each job held, CPU ms per job by
# process (and the machine's per job under each runc) and raft entries
# per job. Needs root, runc and busybox.
# RUNC="runc /path/to/runc" names the baselines instead; the nodelet's
# run directory is on a tmpfs the benchmark mounts (RUN_DIR=disk: not).
# SUBMIT=each submits the N jobs as N `bsub JOBFILE` processes one after
# the other (as workflow tools and job loops do) instead of one `bsub
# --count N` request (SUBMIT=batch, the default); SUBMIT=both runs the
# two one after the other on the same cluster and prints their figures
# side by side (SUBMIT=each,batch: in the other order).
N ?= 100
SUBMIT ?= batch
OCI_RUNTIME ?=
RUN_DIR ?=
RUNC ?= runc $(CURDIR)/$(BIN)/runc-linked
bench-pipeline: build
	@if [ "$$(id -u)" != 0 ]; then echo "bench-pipeline: needs root (runc containers): run sudo make bench-pipeline" >&2; exit 1; fi
	@for c in runc busybox; do command -v $$c >/dev/null || { echo "bench-pipeline: needs $$c (make deps installs it)" >&2; exit 1; }; done
	@case " $(RUNC) " in *" $(CURDIR)/$(BIN)/runc-linked "*) $(MAKE) --no-print-directory runc-linked;; esac
	N=$(N) SUBMIT=$(SUBMIT) OCI_RUNTIME=$(OCI_RUNTIME) RUNC="$(RUNC)" RUN_DIR=$(RUN_DIR) $(GO) test -count=1 -run '^$$' -bench '^BenchmarkPipeline$$' -benchtime 1x -v -timeout 30m ./e2e/

# runc itself at the version of github.com/opencontainers/runc in go.mod,
# the libcontainer the nodelet runs containers with.
runc-linked:
	@mkdir -p $(BIN)
	$(GO) mod download github.com/opencontainers/runc
	cd "$$($(GO) list -m -f '{{.Dir}}' github.com/opencontainers/runc)" && \
		GOFLAGS=-mod=mod CGO_ENABLED=1 $(GO) build -trimpath -tags '$(SECCOMP_TAG)' -o $(CURDIR)/$(BIN)/runc-linked .
	@$(call REWRITE,$(BIN)/runc-linked)

# The session burst benchmark (docs/pipeline.md, Cluster sessions at
# once): SESSIONS cluster sessions of SIZE containers submitted in one
# request (bsub --count) to `schedd --dev --nodes NODES` with room for
# all at once; prints submit → first output p50/p90/p99/max per session,
# submit → all running, the stages, CPU ms per session by process and the
# load average, beside the same containers started at once by `runc run
# --detach` with each runc of RUNC (as bench-pipeline's). STEPS=1 adds
# the nodelets' container start steps (-v).
# RUNTIME picks what runs the nodes: runc (the default) dev nodelets
# starting runc containers; fake the same nodelets with the fake OCI
# runtime (nodelet.hcl oci_runtime = "fake", benchmark_fake_runtime =
# true), which does all of troupe's work for a container and starts none,
# so troupe's own share is measured without runc's (no runc baseline);
# nodesim troupe-nodesim's simulated nodes (--first-output), schedd's
# share alone. OCI_RUNTIME goes with RUNTIME=runc only.
# Needs root and busybox, and runc for RUNTIME=runc. NODES here defaults
# to 4, not bench-scale's 10000.
SESSIONS ?= 100
SIZE     ?= 4
STEPS    ?=
RUNTIME  ?= runc
SESSION_NODES = $(if $(filter command line environment,$(origin NODES)),$(NODES),4)
bench-sessions: build
	@if [ "$$(id -u)" != 0 ]; then echo "bench-sessions: needs root (the dev cluster's test hosts and session networks): run sudo make bench-sessions" >&2; exit 1; fi
	@case "$(RUNTIME)" in runc|fake|nodesim) ;; *) echo "bench-sessions: RUNTIME=$(RUNTIME): want runc (the default), fake or nodesim" >&2; exit 1;; esac
	@for c in $(if $(filter runc,$(RUNTIME)),runc) busybox; do command -v $$c >/dev/null || { echo "bench-sessions: needs $$c (make deps installs it)" >&2; exit 1; }; done
	@if [ "$(RUNTIME)" = runc ]; then case " $(RUNC) " in *" $(CURDIR)/$(BIN)/runc-linked "*) $(MAKE) --no-print-directory runc-linked;; esac; fi
	SESSIONS=$(SESSIONS) SIZE=$(SIZE) NODES=$(SESSION_NODES) STEPS=$(STEPS) RUNTIME=$(RUNTIME) OCI_RUNTIME=$(OCI_RUNTIME) RUN_DIR=$(RUN_DIR) RUNC="$(RUNC)" \
		$(GO) test -count=1 -run '^$$' -bench '^BenchmarkSessionBurst$$' -benchtime 1x -v -timeout 30m ./e2e/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

clean:
	rm -rf $(BIN) libexec
