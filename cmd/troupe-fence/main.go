// Command troupe-fence is the node's fence: nodelet starts it, in a
// session of its own, to kill the node's containers when the nodelet's
// lease from schedd runs out, even when the nodelet itself is frozen or
// dead (package nodelet/fence; nodelet(8), FENCING). It is internal: no
// one runs it by hand.
//
// SIGTERM makes it look at the lease file at once; it exits only when
// the file is gone or names another owner, so a stray SIGTERM cannot
// lift the fence.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/troupe-hpc/troupe/nodelet/fence"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("troupe-fence", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg fence.Config
	fs.StringVar(&cfg.LeaseFile, "lease", "", "the nodelet's lease file")
	fs.StringVar(&cfg.Owner, "owner", "", "owner token of the nodelet instance guarded")
	fs.IntVar(&cfg.Nodelet, "nodelet-pid", 0, "pid of that nodelet")
	fs.StringVar(&cfg.Runc, "runc", "", "runc binary (with --runc-root)")
	fs.StringVar(&cfg.RuncRoot, "runc-root", "", "the nodelet's runc --root: its containers are killed at the deadline")
	fs.BoolVar(&cfg.Children, "children", false, "also kill every other descendant of the nodelet at the deadline")
	fs.DurationVar(&cfg.Poll, "poll", 0, "longest sleep between looks at the lease file (default 1s)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "troupe-fence: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg.Log = slog.New(slog.NewTextHandler(stderr, nil)).With("pid", os.Getpid())
	wake := make(chan os.Signal, 1)
	signal.Notify(wake, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := fence.Run(context.Background(), cfg, wake); err != nil {
		fmt.Fprintf(stderr, "troupe-fence: %v\n", err)
		return 1
	}
	return 0
}
