// Package e2e runs whole troupe clusters on this machine: the real
// binaries (schedd --dev with nodelets, bsub, bqueue, bjob, bkill,
// troupe-ssh) and real runc containers. As root with runc, schedd --dev
// puts each nodelet in its own test host (package nodelet/devhosts: a
// network namespace on an underlay bridge), so multi-node sessions cross
// a real VXLAN overlay. The tests need root and runc, some busybox and
// OpenMPI; without them they skip, saying so. BenchmarkSessionLaunch
// measures the 4-container launch target, BenchmarkSessionBurst (make
// bench-sessions) many sessions submitted at once. TestMain builds the
// binaries, or with TROUPE_E2E_BIN=dir takes prebuilt ones from dir, so
// that the test binary (go test -c) runs where Go is not.
package e2e
