// Package cli holds what the user tools (bsub, bqueue, bkill, bjob, bhosts)
// share: flag setup with the common --addr and -o flags, one-line errors,
// table and JSON rendering, and the formatting of times, durations and
// amounts.
//
// Every tool's main is
//
//	func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
//
// and run returns the exit status: 0 success, 1 failure (one line on
// stderr, "prog: cause"), 2 a usage error (one line and a hint to run -h).
//
// Renderers take the moment to render at ("now") as an argument and show
// timestamps in now's location, so that tests pin both clock and zone.
//
// It must not import sched/... or nodelet/...: the user tools reach
// schedd through internal/client only (cmd/layout_test.go checks).
package cli
