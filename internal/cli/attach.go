package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/internal/backoff"
	"github.com/troupe-hpc/troupe/internal/client"
)

// Terminal is one interactive job's terminal, as bsub -I and battach
// open it.
type Terminal struct {
	Prog   string
	Client *client.Client
	JobID  uint64
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer // the <<…>> progress lines, as LSF prints them
	// Submitted: the job was just submitted for this terminal (bsub -I).
	// An interrupt before it starts kills it (nobody is left to use
	// it), and an end before the terminal opened gives the job's exit
	// status; otherwise (battach) that end is a failure.
	Submitted bool
	// From is the state index the submission was stored at (0 unknown):
	// the first look at the job waits for a lagging peer to hold it.
	From uint64
}

// attachRetry: a terminal that is not open yet (the nodelet still
// starting main1's command) is asked for again this often, this long.
const (
	attachRetry   = 250 * time.Millisecond
	attachPatient = 30 * time.Second
)

// Run waits until the job's main1 runs, showing where it stands, then
// carries this terminal to it until its command exits. It returns the
// exit status for the command: the command's own, 0 after a detach (the
// job goes on), or ExitFail with one line on stderr.
func (t Terminal) Run(ctx context.Context) int {
	fmt.Fprintf(t.Stderr, "<<Waiting for dispatch ...>>\r\n")
	j, code, ok := t.waitRunning(ctx)
	if !ok {
		return code
	}
	fmt.Fprintf(t.Stderr, "<<Starting on %s>>\r\n", j.Containers[0].Node)
	var stream io.ReadWriteCloser
	for deadline := time.Now().Add(attachPatient); ; {
		var err error
		stream, err = t.Client.Attach(ctx, t.JobID, "")
		if err == nil {
			break
		}
		var ae *client.APIError
		if ctx.Err() != nil || !errors.As(err, &ae) || ae.Status != 409 || time.Now().After(deadline) {
			return Fail(t.Stderr, t.Prog, JobError(t.JobID, err))
		}
		if j, _, err := t.Client.Job(ctx, t.JobID, 0, 0); err == nil && j.State.Terminal() {
			return t.ended(j)
		}
		_ = backoff.Sleep(ctx, attachRetry)
	}
	code, err := attach.Run(stream, t.Stdin, t.Stdout)
	switch {
	case errors.Is(err, attach.ErrDetached):
		fmt.Fprintf(t.Stderr, "\r\n<<Detached: job %d goes on; battach %d comes back to it>>\r\n", t.JobID, t.JobID)
		return ExitOK
	case err != nil:
		return Fail(t.Stderr, t.Prog, JobError(t.JobID, err))
	}
	return code
}

// waitRunning follows the job until main1 runs; false with the exit
// status when it will not (ended, interrupted, schedd gone).
func (t Terminal) waitRunning(ctx context.Context) (api.Job, int, bool) {
	index := Before(t.From)
	for {
		j, next, err := t.Client.Job(ctx, t.JobID, index, 30*time.Second)
		switch {
		case ctx.Err() != nil:
			if t.Submitted {
				kctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if _, err := t.Client.Kill(kctx, t.JobID); err == nil {
					fmt.Fprintf(t.Stderr, "<<Job %d killed: interrupted before it started>>\n", t.JobID)
					return j, 130, false
				}
			}
			fmt.Fprintf(t.Stderr, "%s: stopped waiting; job %d goes on (battach %d, or bkill %d)\n", t.Prog, t.JobID, t.JobID, t.JobID)
			return j, 130, false
		case err != nil:
			return j, Fail(t.Stderr, t.Prog, JobError(t.JobID, err)), false
		}
		if j.State.Terminal() {
			return j, t.ended(j), false
		}
		if !j.Interactive {
			return j, Fail(t.Stderr, t.Prog, fmt.Errorf("job %d is not interactive (submit it with bsub -I); bpeek shows its output", t.JobID)), false
		}
		if len(j.Containers) > 0 && j.Containers[0].State == api.ContainerRunning {
			return j, 0, true
		}
		if next == 0 || next == index {
			_ = backoff.Sleep(ctx, time.Second)
		}
		index = next
	}
}

// ended reports a job that ended before its terminal could open.
func (t Terminal) ended(j api.Job) int {
	fmt.Fprintf(t.Stderr, "%s: job %d ended %s before its terminal opened\n", t.Prog, j.ID, StateWithReason(j))
	if !t.Submitted {
		return ExitFail
	}
	if j.State == api.JobFailed && j.ExitCode > 0 && j.ExitCode < 256 {
		return j.ExitCode
	}
	if j.State == api.JobCompleted {
		return ExitOK
	}
	return ExitFail
}
