package main

import (
	"context"
	"fmt"
	"io"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
)

// defaultShell is what an interactive job runs in main1 when neither the
// job file nor the command line names a command. Not a login shell: the
// image's /etc/profile would reset the PATH that reaches troupe's ssh.
var defaultShell = []string{"/bin/sh"}

// interactiveCommand gives main1 of an interactive job its command:
// CMD from the command line, else the file's, else a shell.
func interactiveCommand(spec *jobspec.Job, cmd []string) {
	switch {
	case len(cmd) > 0:
		spec.SetMainCommand(cmd)
	case len(spec.MainCommand()) == 0:
		spec.SetMainCommand(defaultShell)
	}
}

// interactive follows submitted job id to main1's terminal and carries
// this one to it (bsub -I); the exit status is the command's.
func interactive(ctx context.Context, c *client.Client, resp api.SubmitResponse, stdin io.Reader, stdout, stderr io.Writer) int {
	fmt.Fprintf(stderr, "Job <%d> is submitted to partition <%s>.\r\n", resp.JobID, resp.Partition)
	return cli.Terminal{
		Prog: prog, Client: c, JobID: resp.JobID,
		Stdin: stdin, Stdout: stdout, Stderr: stderr,
		Submitted: true, From: resp.Index,
	}.Run(ctx)
}
