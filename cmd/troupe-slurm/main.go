// Command troupe-slurm is Slurm's commands for troupe: sbatch, squeue,
// sacct, scancel, scontrol, sinfo and srun in one program that acts as the command
// it is called as (a link named sbatch is sbatch), or as the command its
// first argument names ("troupe-slurm squeue -u me"). `make build` lays
// the links out in libexec/troupe/slurm/, a directory users put first on
// PATH, so that they never shadow a real Slurm's commands in /usr/bin.
// Their options, outputs, state names and exit codes follow Slurm
// 22.05's, for the workflow tools and scripts written for Slurm.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/troupe-hpc/troupe/internal/client"
)

// commands are Slurm's commands troupe-slurm is.
var commands = map[string]func(args []string, stdin io.Reader, stdout, stderr io.Writer) int{
	"sbatch":   sbatch,
	"squeue":   squeue,
	"sacct":    sacct,
	"scancel":  scancel,
	"sinfo":    sinfo,
	"scontrol": scontrol,
	"srun":     srun,
}

// Names are the commands, sorted (the Makefile's links).
func names() []string {
	var ns []string
	for n := range commands {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

func main() { os.Exit(dispatch(os.Args, os.Stdin, os.Stdout, os.Stderr)) }

func dispatch(argv []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if f, ok := commands[filepath.Base(argv[0])]; ok {
		return run(f, argv[1:], stdin, stdout, stderr)
	}
	if len(argv) > 1 {
		if f, ok := commands[argv[1]]; ok {
			return run(f, argv[2:], stdin, stdout, stderr)
		}
		if argv[1] == "--list" {
			fmt.Fprintln(stdout, strings.Join(names(), "\n"))
			return 0
		}
	}
	fmt.Fprintf(stderr, "usage: troupe-slurm COMMAND [ARG...], COMMAND one of %s\n"+
		"(or a link named COMMAND; troupe-slurm --list lists them). See troupe-slurm(1).\n", strings.Join(names(), ", "))
	return 2
}

// version is what every command's -V and --version print: Slurm's
// form, the version whose options and formats troupe follows.
const version = "slurm 22.05 (troupe)"

// run runs a command; -V or --version alone prints the version, as
// every Slurm command does.
func run(f func([]string, io.Reader, io.Writer, io.Writer) int, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-V" || args[0] == "--version") {
		fmt.Fprintln(stdout, version)
		return 0
	}
	return f(args, stdin, stdout, stderr)
}

// fail writes Slurm's error line, "sbatch: error: ...", and returns 1.
func fail(stderr io.Writer, prog string, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: error: %s\n", prog, fmt.Sprintf(format, args...))
	return 1
}

// newClient is a client for schedd at $TROUPE_ADDR (else the default
// socket; $TROUPE_TIMEOUT bounds each call), with the tools' warnings
// and retry notes. Slurm's commands have no option for it.
func newClient(prog string, stderr io.Writer) (*client.Client, error) {
	c, err := client.New(client.ResolveAddr(""))
	if err != nil {
		return nil, err
	}
	for _, a := range c.Plain() {
		fmt.Fprintf(stderr, "%s: warning: %s is plain http: requests and answers cross the network in clear text and no token is sent to it; use https:// or host:port\n", prog, a)
	}
	c.OnRetry(func(msg string) { fmt.Fprintf(stderr, "%s: %s\n", prog, msg) })
	return c, nil
}

// usage prints a command's help (-h/--help, --usage).
func usage(w io.Writer, prog, synopsis string, opts []string) int {
	fmt.Fprintf(w, "Usage: %s %s\n\n", prog, synopsis)
	for _, o := range opts {
		fmt.Fprintln(w, "  "+o)
	}
	fmt.Fprintf(w, "\ntroupe's %s; see troupe-slurm(1). schedd: $%s.\n", prog, client.EnvAddr)
	return 0
}
