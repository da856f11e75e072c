// Command bjob shows one job in detail, as LSF's bjobs -l and Slurm's
// scontrol show job do.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
)

const prog = "bjob"

var command = cli.Command{
	Name:     prog,
	Synopsis: "JOBID",
	Summary: "Show one job in detail: who, where, state and reason, exit code, session id,\n" +
		"times, the URLs of its services (/apps), and each container with its node,\n" +
		"state, exit code and kernel id.",
	Examples: []string{
		"bjob 42",
		"bjob -o json 42 | jq .containers",
		"bjob --login jupyter 42",
	},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	fs.OutputFlag()
	login := fs.String("login", "", "print a one-time link that logs a browser in to the job's `service` (its owner only)")
	pos, err := fs.Parse(args)
	if err != nil {
		return fs.Exit(err)
	}
	id, code, ok := fs.OneJobID(pos)
	if !ok {
		return code
	}
	c, err := fs.Client()
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	if *login != "" {
		return printLogin(ctx, c, id, *login, stdout, stderr)
	}
	j, _, err := c.Job(ctx, id, 0, 0)
	switch {
	case client.IsNotFound(err):
		return cli.Fail(stderr, prog, fmt.Errorf("job %d: not found", id))
	case err != nil:
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

// printLogin prints the browser login link to service of job id: the
// full URL when schedd or TROUPE_ADDR names its https address, else its
// path, to open on schedd's TCP address.
func printLogin(ctx context.Context, c *client.Client, id uint64, service string, stdout, stderr io.Writer) int {
	l, err := c.AppLogin(ctx, id, service)
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	link := l.URL
	if link == "" {
		if base := cli.AppURL(c.Addr(), id, service); strings.Contains(base, "://") {
			link = strings.TrimSuffix(base, "/apps/"+strconv.FormatUint(id, 10)+"/"+service+"/") + l.Path
		}
	}
	if link == "" {
		fmt.Fprintf(stdout, "%s\n", l.Path)
		fmt.Fprintf(stderr, "%s: open this path on schedd's https address (schedd --listen) before %s; it works once\n", prog, l.Expires.Local().Format(time.TimeOnly))
		return cli.ExitOK
	}
	fmt.Fprintf(stdout, "%s\n", link)
	fmt.Fprintf(stderr, "%s: open it in a browser before %s; it works once\n", prog, l.Expires.Local().Format(time.TimeOnly))
	return cli.ExitOK
}
