package cli

import (
	"context"

	"fmt"
	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// ParseJobID reads a job id as users type it: a positive integer.
func ParseJobID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("invalid job id %q: want a number such as 42", s)
	}
	return id, nil
}

// SignalContext is canceled on Ctrl-C or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// OneJobRef is OneJobID for a command that also takes an element of a
// job array ("12[5]"): bjob.
func (fs *FlagSet) OneJobRef(pos []string) (ref api.JobRef, code int, ok bool) {
	switch {
	case len(pos) == 0:
		return ref, fs.UsageError("missing job id"), false
	case len(pos) > 1:
		return ref, fs.UsageError("one job id at a time (bqueue lists many)"), false
	}
	refs, err := ParseJobRefs(pos)
	if err != nil {
		return ref, fs.UsageError("%v", err), false
	}
	return refs[0], 0, true
}

// ResolveJob is the job id of the job ref names: the id itself, or for
// an element of a job array ("12[5]") the element's own, which it has
// once it came up.
func ResolveJob(ctx context.Context, c *client.Client, ref api.JobRef) (uint64, error) {
	if !ref.Element {
		return ref.ID, nil
	}
	j, _, err := c.JobRef(ctx, ref, 0, 0)
	switch {
	case client.IsNotFound(err):
		return 0, fmt.Errorf("job %s: not found", ref)
	case err != nil:
		return 0, err
	case j.ID == 0:
		return 0, fmt.Errorf("job %s is %s: it has not come up yet, so it has no session", ref, j.State)
	}
	return j.ID, nil
}

// OneJobID is the one JOBID operand of a command that takes exactly
// one (bjob, bpeek, battach). When pos is not that, it prints the usage
// error and returns false with the exit status.
func (fs *FlagSet) OneJobID(pos []string) (id uint64, code int, ok bool) {
	switch {
	case len(pos) == 0:
		return 0, fs.UsageError("missing job id"), false
	case len(pos) > 1:
		return 0, fs.UsageError("one job id at a time (bqueue lists many)"), false
	}
	id, err := ParseJobID(pos[0])
	if err != nil {
		return 0, fs.UsageError("%v", err), false
	}
	return id, 0, true
}

// JobError puts "job ID: " before err unless its message starts so
// already (schedd's refusals name the job: "job 7: not found").
func JobError(id uint64, err error) error {
	prefix := fmt.Sprintf("job %d: ", id)
	if strings.HasPrefix(err.Error(), prefix) {
		return err
	}
	return fmt.Errorf("job %d: %w", id, err)
}

// Before is the blocking-query index that waits until a peer has applied
// state index from (a just-submitted job's): schedd answers once its
// index is past the one asked for. 0 (from unknown) does not wait.
func Before(from uint64) uint64 {
	if from == 0 {
		return 0
	}
	return from - 1
}
