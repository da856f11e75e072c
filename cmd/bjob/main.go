// Command bjob shows one job in detail, as LSF's bjobs -l and Slurm's
// scontrol show job do.
package main

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
)

const prog = "bjob"

var command = cli.Command{
	Name:     prog,
	Synopsis: "JOBID | \"JOBID[INDEX]\"",
	Summary: "Show one job in detail: who, where, state and reason, exit code, session id,\n" +
		"times, the URLs of its services (/apps), and each container with its node,\n" +
		"state, exit code and kernel id. A job (or element) that has ended and left\n" +
		"schedd's state is shown from the accounting store: its last run's record.",
	Examples: []string{
		"bjob 42",
		"bjob \"12[5]\"                # element 5 of job array 12",
		"bjob -o json 42 | jq .containers",
	},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	fs.OutputFlag()
	pos, err := fs.Parse(args)
	if err != nil {
		return fs.Exit(err)
	}
	id, code, ok := fs.OneJobRef(pos)
	if !ok {
		return code
	}
	c, err := fs.Client()
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	j, _, err := c.JobRef(ctx, id, 0, 0)
	if client.IsNotFound(err) {
		// Ended and gone to the accounting store: its last run's record
		// there, picked by schedd (an element by the store's index).
		var h api.History
		h, err = c.History(ctx, url.Values{"id": {id.String()}})
		var last *api.HistoryJob
		for i := range h.Jobs {
			if r := &h.Jobs[i]; (id.Element || r.ID == id.ID) && (last == nil || r.Requeues >= last.Requeues) {
				last = r
			}
		}
		switch {
		case err != nil:
		case last == nil:
			return cli.Fail(stderr, prog, fmt.Errorf("job %s: not found", id))
		default:
			j = api.JobFromHistory(*last)
		}
	}
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	if fs.Format() == cli.FormatJSON {
		err = cli.WriteJSON(stdout, j)
	} else {
		err = cli.WriteJobAt(stdout, j, time.Now(), c.Addr())
	}
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	return cli.ExitOK
}
