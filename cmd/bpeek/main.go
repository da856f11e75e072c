// Command bpeek shows the output of a job's container, as LSF's bpeek
// does: while the job runs and after it ended. It reads the job from
// schedd, expands its output pattern for the container
// (jobspec.Job.OutputPath: relative patterns resolve in the submit
// directory, a shared file system) and prints the file; with -f it
// follows it until the job ends.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/backoff"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
)

const prog = "bpeek"

var command = cli.Command{
	Name:     prog,
	Synopsis: "JOBID",
	Summary: "Show the output (stdout and stderr) of a job's container, main1 unless --host\n" +
		"names another; -f follows it until the job ends.",
	Examples: []string{
		"bpeek 42",
		"bpeek --host sub1 -f 42",
	},
}

// pollEvery is how often -f looks for new output and the job's state.
const pollEvery = 200 * time.Millisecond

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fset := cli.NewFlagSet(command, stdout, stderr)
	host := fset.String("host", "main1", "the container `host` whose output to show (main1, sub1, ...)")
	follow := fset.Bool("f", false, "follow the output until the job ends")
	pos, err := fset.Parse(args)
	if err != nil {
		return fset.Exit(err)
	}
	ref, code, ok := fset.OneJobRef(pos)
	if !ok {
		return code
	}
	c, err := fset.Client()
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	id, err := cli.ResolveJob(ctx, c, ref)
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	if err := peek(ctx, c, id, *host, *follow, stdout); err != nil {
		if ctx.Err() != nil {
			return cli.ExitOK // ^C while following
		}
		return cli.Fail(stderr, prog, err)
	}
	return cli.ExitOK
}

func peek(ctx context.Context, c *client.Client, id uint64, host string, follow bool, w io.Writer) error {
	job, err := getJob(ctx, c, id)
	if err != nil {
		return err
	}
	if job.Cwd == "" && job.User != "" {
		// schedd shows other users' jobs without their directories.
		return fmt.Errorf("job %d belongs to %s: only its owner or an admin may peek into it", id, job.User)
	}
	if _, ok := job.Container(host); !ok {
		return fmt.Errorf("job %d has no container %s", id, host)
	}
	path, err := job.Spec.OutputPath(job.OutputVars(host))
	if err != nil {
		return err
	}
	var off int64
	for {
		n, err := copyFrom(path, off, w)
		off += n
		if err != nil && !(errors.Is(err, fs.ErrNotExist) && !job.State.Terminal()) {
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("job %d (%s): no output at %s", id, job.State, path)
			}
			return err
		}
		if !follow || job.State.Terminal() {
			if errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(w, "job %d is %s: no output yet at %s\n", id, job.State, path)
			}
			return nil
		}
		if err := backoff.Sleep(ctx, pollEvery); err != nil {
			return err
		}
		ended := job.State.Terminal()
		if job, err = getJob(ctx, c, id); err != nil {
			return err
		}
		if !ended && job.State.Terminal() {
			// One last read after the end: the last lines are in now.
			n, _ := copyFrom(path, off, w)
			off += n
			return nil
		}
	}
}

func getJob(ctx context.Context, c *client.Client, id uint64) (api.Job, error) {
	j, _, err := c.Job(ctx, id, 0, 0)
	if client.IsNotFound(err) {
		return j, fmt.Errorf("job %d: not found", id)
	}
	return j, err
}

// copyFrom copies path from offset off to w and returns the bytes copied.
func copyFrom(path string, off int64, w io.Writer) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	return io.Copy(w, f)
}
