package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strconv"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
)

// Selection is how bkill, bhold and brelease choose jobs from the queue:
// -u, -t/--state, -p/--partition and -J/--name.
type Selection struct {
	user, states, partitions, name *string
	// Default are the states chosen when -t is not given (bhold: PENDING,
	// brelease: HELD); none means any state.
	Default []api.JobState
}

// SelectFlags defines the selection flags on fs; verb ("cancel", "hold",
// "release") words their usage.
func SelectFlags(fs *FlagSet, verb string) *Selection {
	s := &Selection{
		user: fs.String("u", "", verb+" the jobs of `user` (\"all\": everyone's jobs you may "+verb+")"),
		states: fs.String("t", "", verb+" only jobs in these `states` (comma-separated: PENDING, HELD, RUNNING, …,\n"+
			"LSF's PEND, RUN or Slurm's PD, R)"),
		partitions: fs.String("p", "", verb+" only jobs in these `partitions` (comma-separated)"),
		name:       fs.String("J", "", verb+" only jobs with this `name`"),
	}
	fs.Alias("state", "t")
	fs.Alias("partition", "p")
	fs.Alias("name", "J")
	return s
}

// Active reports whether any selection flag was given.
func (s *Selection) Active() bool {
	return *s.user != "" || *s.states != "" || *s.partitions != "" || *s.name != ""
}

// Check validates the flags before anything reaches schedd; its error is
// a usage error ("-t: unknown job state …").
func (s *Selection) Check() error {
	if _, err := s.filter(); err != nil {
		return err
	}
	return nil
}

func (s *Selection) filter() (JobFilter, error) {
	f := JobFilter{Partitions: SplitList(*s.partitions)}
	if *s.name != "" {
		f.Names = []string{*s.name}
	}
	if *s.states != "" {
		var err error
		if f.States, err = ParseStates(*s.states); err != nil {
			return f, fmt.Errorf("-t: %w", err)
		}
	} else {
		f.States = s.Default
	}
	if *s.user != "" {
		f.Users = []string{*s.user}
	} else {
		f.Users = []string{CurrentUser()}
	}
	return f, nil
}

// Pick lists the queue and returns the ids of the jobs that match (your
// own unless -u says otherwise), in queue order; with ids given, only
// those among them, as scancel does. A job array is one job, in its
// state: its elements are not picked one by one. No match is an error.
func (s *Selection) Pick(ctx context.Context, c *client.Client, ids []uint64) ([]uint64, error) {
	f, err := s.filter()
	if err != nil {
		return nil, err
	}
	list, err := c.Jobs(ctx, 0, 0)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, j := range SortJobs(f.Filter(FoldArrays(list.Jobs))) { // an array is one job here
		if len(ids) == 0 || slices.Contains(ids, j.ID) {
			out = append(out, j.ID)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no job matches")
	}
	return out, nil
}

// ParseJobIDs reads positional job ids.
func ParseJobIDs(args []string) ([]uint64, error) {
	ids := make([]uint64, len(args))
	for i, s := range args {
		var err error
		if ids[i], err = ParseJobID(s); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// ParseJobRefs reads positional job ids, each a job ("42") or an
// element of a job array ("42[5]"; a whole array is its id).
func ParseJobRefs(args []string) ([]api.JobRef, error) {
	refs := make([]api.JobRef, len(args))
	for i, s := range args {
		r, err := api.ParseJobRef(s)
		if err != nil {
			return nil, fmt.Errorf("invalid job id %q: want a number such as 42, or an array element such as 42[5]", s)
		}
		refs[i] = r
	}
	return refs, nil
}

// Refs are ids as job references.
func Refs(ids []uint64) []api.JobRef {
	out := make([]api.JobRef, len(ids))
	for i, id := range ids {
		out[i] = api.JobRef{ID: id}
	}
	return out
}

// PickRefs is the jobs a control command acts on: refs as given, or with
// selection flags the jobs of the queue that match (among refs when
// given, which then may not name array elements).
func PickRefs(ctx context.Context, c *client.Client, sel *Selection, refs []api.JobRef) ([]api.JobRef, error) {
	if !sel.Active() {
		return refs, nil
	}
	ids := make([]uint64, len(refs))
	for i, r := range refs {
		if r.Element {
			return nil, fmt.Errorf("%s names an array element; -u, -t, -p and -J choose whole jobs", r)
		}
		ids[i] = r.ID
	}
	ids, err := sel.Pick(ctx, c, ids)
	return Refs(ids), err
}

// ForEachRef applies do to each job in order, as ForEachJob does; done
// has one %s, the job as given ("42", "42[5]").
func ForEachRef(ctx context.Context, stdout, stderr io.Writer, prog string, refs []api.JobRef,
	do func(context.Context, api.JobRef) (api.Job, error), done string) int {
	code := ExitOK
	for _, ref := range refs {
		_, err := do(ctx, ref)
		switch {
		case err == nil:
			fmt.Fprintf(stdout, done, ref)
		case errors.Is(err, client.ErrUnknownOutcome):
			return Fail(stderr, prog, fmt.Errorf("job %s: %w; see whether it took effect with 'bjob %s' before trying again", ref, err, ref))
		case errors.Is(err, client.ErrUnreachable), errors.Is(err, client.ErrTimeout), ctx.Err() != nil:
			return Fail(stderr, prog, err)
		case client.IsNotFound(err):
			code = Fail(stderr, prog, fmt.Errorf("job %s: not found", ref))
		default: // schedd's refusal names the job already
			code = Fail(stderr, prog, err)
		}
	}
	return code
}

// ForEachJob applies do to each id in order, printing done (a format with
// one %d, such as "Job <%d> is held.\n") for each success and one line on
// stderr for each failure; the others still go on, except when schedd
// cannot be reached, times out, leaves an outcome unknown (the line says
// to look with bjob first) or the context ends, as the rest would fail
// the same way. It returns the exit status: 0 when all succeeded, else 1.
func ForEachJob(ctx context.Context, stdout, stderr io.Writer, prog string, ids []uint64,
	do func(context.Context, uint64) (api.Job, error), done string) int {
	code := ExitOK
	for _, id := range ids {
		_, err := do(ctx, id)
		switch {
		case err == nil:
			fmt.Fprintf(stdout, done, id)
		case errors.Is(err, client.ErrUnknownOutcome):
			return Fail(stderr, prog, fmt.Errorf("job %d: %w; see whether it took effect with 'bjob %d' before trying again", id, err, id))
		case errors.Is(err, client.ErrUnreachable), errors.Is(err, client.ErrTimeout), ctx.Err() != nil:
			return Fail(stderr, prog, err)
		case client.IsNotFound(err):
			code = Fail(stderr, prog, fmt.Errorf("job %d: not found", id))
		default: // schedd's refusal names the job already
			code = Fail(stderr, prog, err)
		}
	}
	return code
}

// CurrentUser is the caller's user name (else $USER, else the uid).
func CurrentUser() string {
	if u, err := user.LookupId(strconv.Itoa(os.Getuid())); err == nil {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Getuid())
}

// Action is a Control's Act that applies the API's action ("hold",
// "release") to each job.
func Action(action string) func(*client.Client) func(context.Context, api.JobRef) (api.Job, error) {
	return func(c *client.Client) func(context.Context, api.JobRef) (api.Job, error) {
		return func(ctx context.Context, r api.JobRef) (api.Job, error) { return c.Control(ctx, r, action, nil) }
	}
}

// Control is a command that acts on jobs chosen by id or by the
// selection flags, one call to schedd per job: bhold, brelease, bstop,
// bresume, bkill.
type Control struct {
	Command
	Verb    string         // "hold": words the selection flags' usage
	Default []api.JobState // states the selection picks without -t
	// Act acts on one job, whole job array or array element.
	Act  func(*client.Client) func(context.Context, api.JobRef) (api.Job, error)
	Done string // printed per job, one %s: "Job <%s> is held.\n"
	// Hosts takes LSF's -m (bstop, bresume, bkill): the cluster's name
	// only.
	Hosts bool
	// Options, when set, defines the command's own flags on fs (bkill's
	// -s, -d, --host). The function it returns runs once the arguments
	// are parsed and the ids and selection checked, before schedd is
	// asked anything; it may set Act and Done from the flags. An error
	// made by UsageErr is printed with the usage hint (exit 2), any
	// other as a failure (exit 1).
	Options func(fs *FlagSet) func(c *Control) error
}

// usageError is an error Control prints as a usage error.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// UsageErr is an error of bad arguments, for a Control's Options:
// printed with the usage hint, exit status 2.
func UsageErr(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// Run is the command's main: it parses args, chooses the jobs and acts on
// each, and returns the exit status.
func (c Control) Run(args []string, stdout, stderr io.Writer) int {
	fs := NewFlagSet(c.Command, stdout, stderr)
	sel := SelectFlags(fs, c.Verb)
	sel.Default = c.Default
	hostsOf := func() (Hosts, error) { return Hosts{}, nil }
	if c.Hosts {
		hostsOf = HostsFlag(fs, ControlHostsUsage)
	}
	var options func(*Control) error
	if c.Options != nil {
		options = c.Options(fs)
	}
	pos, err := fs.Parse(args)
	if err != nil {
		return fs.Exit(err)
	}
	if err := WholeClusterOnly(hostsOf); err != nil {
		return fs.UsageError("%v", err)
	}
	refs, err := ParseJobRefs(pos)
	if err != nil {
		return fs.UsageError("%v", err)
	}
	if err := sel.Check(); err != nil {
		return fs.UsageError("%v", err)
	}
	if len(refs) == 0 && !sel.Active() {
		return fs.UsageError("missing job id (or -u, -t, -p, -J to choose jobs)")
	}
	if options != nil {
		if err := options(&c); err != nil {
			var u usageError
			if errors.As(err, &u) {
				return fs.UsageError("%v", err)
			}
			return Fail(stderr, c.Name, err)
		}
	}
	cl, err := fs.Client()
	if err != nil {
		return Fail(stderr, c.Name, err)
	}
	ctx, stop := SignalContext()
	defer stop()
	if refs, err = PickRefs(ctx, cl, sel, refs); err != nil {
		return Fail(stderr, c.Name, err)
	}
	return ForEachRef(ctx, stdout, stderr, c.Name, refs, c.Act(cl), c.Done)
}
