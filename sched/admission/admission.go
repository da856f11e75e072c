package admission

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/catalog"
	"github.com/troupe-hpc/troupe/internal/units"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/partition"
)

// Problem is one reason a submission is refused.
type Problem struct {
	// Path is the spec's JSON path of the setting at fault
	// ("walltime", "cluster.size", "resources.cpu"), "" for the
	// submission as a whole or a problem jobspec found.
	Path string
	// Subject is where the job file wrote the setting, nil when the job
	// came from no file or the setting from elsewhere (a bsub flag).
	Subject *hcl.Range
	// Message says what is wrong, without the position.
	Message string
}

// Position is "file:line:col", "" without a subject.
func (p Problem) Position() string {
	if p.Subject == nil || p.Subject.Filename == "" || p.Subject.Start.Line == 0 {
		return ""
	}
	return fmt.Sprintf("%s:%d:%d", p.Subject.Filename, p.Subject.Start.Line, p.Subject.Start.Column)
}

// String is the problem compiler style: "file:line:col: message", or
// the message alone without a position.
func (p Problem) String() string {
	if pos := p.Position(); pos != "" {
		return pos + ": " + p.Message
	}
	return p.Message
}

// API is the problem as the API's error body carries it.
func (p Problem) API() api.Problem {
	return api.Problem{Path: p.Path, Position: p.Position(), Message: p.Message}
}

// Refusal is Admit's error: every problem it found.
type Refusal struct {
	Problems []Problem
	// QueueFull marks a refusal for a queue limit alone (max_queued,
	// max_queued_per_user, max_queued_input_per_user): the same job may
	// be taken later.
	QueueFull bool
}

// Error is the problems one after the other, "; " between them.
func (r *Refusal) Error() string {
	s := make([]string, len(r.Problems))
	for i, p := range r.Problems {
		s[i] = p.String()
	}
	return strings.Join(s, "; ")
}

// API is the problems as the API's error body carries them.
func (r *Refusal) API() []api.Problem {
	out := make([]api.Problem, len(r.Problems))
	for i, p := range r.Problems {
		out[i] = p.API()
	}
	return out
}

// Settings are schedd's own limits on what it takes.
type Settings struct {
	// MaxJobInput caps a job's text in bytes (jobspec.Job.CheckInput);
	// 0 is jobspec.DefaultMaxInput.
	MaxJobInput int
	// MaxQueuedPerUser caps the jobs one user may have waiting (PENDING
	// or HELD); negative is unlimited, 0 too.
	MaxQueuedPerUser int
	// MaxQueued caps the jobs all users together may have waiting; 0 is
	// unlimited.
	MaxQueued int
	// MaxQueuedInputPerUser caps the bytes of job text (InputSize) one
	// user's waiting jobs may hold together; 0 or negative is unlimited.
	MaxQueuedInputPerUser int
	// Images is the image catalog a job naming an image by name must be
	// in; nil lets every name through.
	Images *catalog.Catalog
}

// View is what admission reads of the state: read-only, one consistent
// snapshot for a whole Admit.
type View interface {
	Jobs
	// Config is the partitions config in force.
	Config() *partition.Config
	// Queued is how many jobs wait (PENDING or HELD), a job array once;
	// QueuedOf the same for one uid, and QueuedInputOf the bytes of job
	// text (jobspec.Job.InputSize) those jobs of uid hold together.
	Queued() int
	QueuedOf(uid int) int
	QueuedInputOf(uid int) int
	// Submitted is how many of user's jobs in partition have not ended,
	// a job array once.
	Submitted(user, partition string) int
	// Reservation is the reservation of that name: the users and
	// accounts it admits; ok is false when there is none.
	Reservation(name string) (users, accounts []string, ok bool)
	// NeverFits says why j could never run in its partition even with
	// every node empty, "" when it could (or the partition has no nodes
	// yet: it waits for them).
	NeverFits(j *Job) string
}

// Job is a submission as admission resolved it: what schedd stores,
// less the ids it gives it.
type Job struct {
	Spec        jobspec.Job // Ranges filled when the job came from a file
	Source      string      // the job file's name, "" without one
	User        string
	UID, GID    int
	Cwd         string
	RequestID   string
	Partition   string
	Account     string
	QOS         string        // the spec's, else the partition's or the account's default
	Walltime    time.Duration // the spec's, else the partition's default
	Containers  []jobspec.Container
	DependsOn   *api.Dependency // conditions without the server's statuses
	Held        bool
	Interactive bool
	// Licenses are the site-wide licenses it holds while it runs (the
	// spec's, checked against the partitions file).
	Licenses map[string]int
}

// Admit checks req against the state in v and schedd's settings and
// resolves it; ahead are the jobs before it in the same batch submit,
// not in the state yet, which the queue limits count. The error is a
// *Refusal.
func Admit(req api.SubmitRequest, v View, set Settings, ahead []*Job) (*Job, error) {
	spec, probs := parse(req)
	if len(probs) > 0 {
		return nil, &Refusal{Problems: probs}
	}
	if probs = fromDiags(spec.Validate()); len(probs) > 0 {
		return nil, &Refusal{Problems: probs}
	}
	if probs = fromDiags(spec.CheckInput(set.MaxJobInput)); len(probs) > 0 {
		return nil, &Refusal{Problems: probs}
	}
	j := &Job{Spec: *spec, User: req.User, UID: req.UID, GID: req.GID, Cwd: req.Cwd, RequestID: req.RequestID,
		Held: req.Hold, Interactive: req.Interactive, Containers: spec.Containers(), Licenses: maps.Clone(spec.Licenses)}
	if spec.Ranges != nil {
		j.Source = sourceName(req)
	}
	if probs = j.request(req, v, set); len(probs) > 0 {
		return nil, &Refusal{Problems: probs}
	}
	cfg := v.Config()
	p := cfg.Partition(j.Partition)
	probs = PartitionLimits(cfg, p, j.shape())
	if pr := UserCaps(p, j.Containers); pr != nil {
		probs = append(probs, *pr)
	}
	probs = append(probs, LicenseProblems(cfg, j.Licenses)...)
	if max := p.UserLimits.MaxSubmitJobs; max > 0 {
		n := v.Submitted(j.User, j.Partition)
		for _, o := range ahead {
			if o.User == j.User && o.Partition == j.Partition {
				n++
			}
		}
		if n >= max {
			probs = append(probs, Problem{Message: fmt.Sprintf("user %s already has %d jobs queued or running in partition %s, its limit (user_limits.max_submit_jobs %d)",
				j.User, n, j.Partition, max)})
		}
	}
	if len(probs) > 0 {
		return nil, j.refuse(probs...)
	}
	if pr := QueueLimits(v, set, j, ahead); pr != nil {
		return nil, &Refusal{Problems: []Problem{*pr}, QueueFull: true}
	}
	if why := v.NeverFits(j); why != "" {
		return nil, j.refuse(j.problem("resources", "%s", why))
	}
	return j, nil
}

// parse is the submission's spec: the job file's text parsed as bsub
// parses a file, else the spec sent with the positions sent along.
// Parsing reads nothing but the text (jobspec never touches files, the
// clock or the environment).
func parse(req api.SubmitRequest) (*jobspec.Job, []Problem) {
	if req.JobFile == "" && req.Vars == nil {
		spec := wire.FromAPI(req.Spec)
		if len(req.Positions) > 0 {
			name := sourceName(req)
			spec.Ranges = make(map[string]hcl.Range, len(req.Positions))
			for path, p := range req.Positions {
				pos := hcl.Pos{Line: p.Line, Column: p.Column}
				spec.Ranges[path] = hcl.Range{Filename: name, Start: pos, End: pos}
			}
		}
		return &spec, nil
	}
	switch {
	case req.JobFile == "":
		return nil, []Problem{{Path: "vars", Message: "vars without a job_file"}}
	case !reflect.ValueOf(req.Spec).IsZero():
		return nil, []Problem{{Message: "give a spec or a job_file, not both"}}
	}
	job, diags := jobspec.ParseWith(sourceName(req), []byte(req.JobFile), jobspec.Options{Vars: req.Vars, Interactive: req.Interactive})
	if diags.HasErrors() {
		return nil, fromDiags(diags)
	}
	if job == nil {
		return nil, []Problem{{Message: sourceName(req) + ": no job in file"}}
	}
	return job, nil
}

// sourceName names the job's file in positions.
func sourceName(req api.SubmitRequest) string {
	if req.Source != "" {
		return req.Source
	}
	return "job.hcl"
}

// fromDiags is jobspec's errors as problems (its warnings are dropped,
// as submit always did).
func fromDiags(diags hcl.Diagnostics) []Problem {
	var out []Problem
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		bare := *d
		bare.Subject = nil
		out = append(out, Problem{Subject: d.Subject, Message: jobspec.FormatDiagnostic(&bare)})
	}
	return out
}

// request checks what the submission asks of schedd beyond the spec and
// resolves partition, account, walltime and dependency.
func (j *Job) request(req api.SubmitRequest, v View, set Settings) []Problem {
	var probs []Problem
	if why := CheckCwd(req.Cwd); why != "" {
		probs = append(probs, Problem{Path: "cwd", Message: why})
	}
	if len(j.Containers) == 0 {
		probs = append(probs, Problem{Message: "the job has no containers"})
	}
	if set.Images != nil {
		for _, c := range j.Containers {
			if !catalog.IsName(c.Image) {
				continue
			}
			if _, err := set.Images.Resolve(c.Image); err != nil {
				probs = append(probs, j.problem(j.imagePath(c), "%v", err))
				break
			}
		}
	}
	cfg := v.Config()
	j.Partition = j.Spec.Partition
	if j.Partition == "" {
		j.Partition = cfg.DefaultPartition
	}
	p := cfg.Partition(j.Partition)
	if p == nil {
		probs = append(probs, j.problem("partition", "partition %q does not exist; known partitions: %s", j.Partition, strings.Join(cfg.PartitionNames(), ", ")))
	} else {
		j.Walltime = p.Walltime(j.Spec.Walltime)
	}
	account, err := cfg.ResolveAccount(req.User, j.Spec.Account)
	if err != nil {
		probs = append(probs, j.problem("account", "%v", err))
	}
	j.Account = account
	probs = append(probs, j.qos(cfg, p)...)
	if req.DependsOn != nil {
		if err := CheckDependency(req.DependsOn, v); err != nil {
			probs = append(probs, Problem{Path: "depends_on", Message: err.Error()})
		}
		j.DependsOn = &api.Dependency{Any: req.DependsOn.Any, Conditions: slices.Clone(req.DependsOn.Conditions)}
		for i := range j.DependsOn.Conditions { // statuses are the server's answers, never stored
			j.DependsOn.Conditions[i].Status, j.DependsOn.Conditions[i].JobState = "", ""
		}
	}
	if name := j.Spec.Reservation; name != "" {
		if pr := j.reservation(req, v, name); pr != nil {
			probs = append(probs, *pr)
		}
	}
	if j.Spec.Array != nil && req.Interactive {
		probs = append(probs, j.problem("array", "a job array cannot be interactive (bsub -I): its elements have no terminal to share; drop -I or the array"))
	}
	return probs
}

// imagePath is the spec path that sets c's image.
func (j *Job) imagePath(c jobspec.Container) string {
	for i, r := range j.Spec.Roles {
		if r.Name == c.Role && r.Image != "" {
			return fmt.Sprintf("roles.%d.image", i)
		}
	}
	return "image"
}

// problem is a problem with the setting at path, placed where the job
// file wrote it. Only the setting itself places it: one a flag set (its
// range dropped) or the file left out has no position.
func (j *Job) problem(path, format string, args ...any) Problem {
	p := Problem{Path: path, Message: fmt.Sprintf(format, args...)}
	if r, ok := j.Spec.Ranges[path]; ok && path != "" {
		p.Subject = &r
	}
	return p
}

// refuse places probs where the job file wrote their settings.
func (j *Job) refuse(probs ...Problem) *Refusal {
	for i, p := range probs {
		if p.Subject == nil && p.Path != "" {
			probs[i] = j.problem(p.Path, "%s", p.Message)
		}
	}
	return &Refusal{Problems: probs}
}

// shape is what the partition limits judge of j.
func (j *Job) shape() Shape {
	return Shape{Account: j.Account, Mode: j.Spec.Cluster.Mode, Containers: len(j.Containers), Walltime: j.Spec.Walltime}
}

// CheckCwd refuses a submit directory that cannot be one: relative, with
// a NUL byte, or longer than PATH_MAX, saying why ("" when it can be).
// Empty is allowed (API callers without one; relative output paths then
// resolve in the container).
func CheckCwd(cwd string) string {
	switch {
	case cwd == "":
		return ""
	case !strings.HasPrefix(cwd, "/"):
		return fmt.Sprintf("cwd %q: the submit directory must be an absolute path", cwd)
	case strings.IndexByte(cwd, 0) >= 0:
		return fmt.Sprintf("cwd %q holds a NUL byte, which no path can", cwd)
	case len(cwd) > 4096:
		return fmt.Sprintf("cwd is %d bytes long; a path may be at most 4096", len(cwd))
	}
	return ""
}

// QueueLimits refuses j when schedd already holds the most jobs waiting
// (PENDING or HELD) that its max_queued allows, or j's user the most
// that max_queued_per_user allows, or when j's text would take its
// user's waiting jobs past max_queued_input_per_user. Every job ahead in
// the batch waits (a new job is PENDING or HELD, and no array element).
func QueueLimits(v View, set Settings, j *Job, ahead []*Job) *Problem {
	if limit := set.MaxQueued; limit > 0 {
		if n := v.Queued() + len(ahead); n >= limit {
			return &Problem{Message: fmt.Sprintf("schedd already holds %d jobs pending or held, its limit for all users together (max_queued %d); try again when some have started",
				n, limit)}
		}
	}
	var mine []*Job
	for _, o := range ahead {
		if o.UID == j.UID {
			mine = append(mine, o)
		}
	}
	if limit := set.MaxQueuedPerUser; limit > 0 {
		if n := v.QueuedOf(j.UID) + len(mine); n >= limit {
			return &Problem{Message: fmt.Sprintf("user %s (uid %d) already has %d jobs pending or held, schedd's limit (max_queued_per_user %d); wait for some to start, or remove some with bkill",
				j.User, j.UID, n, limit)}
		}
	}
	if limit := set.MaxQueuedInputPerUser; limit > 0 {
		held := v.QueuedInputOf(j.UID)
		for _, o := range mine {
			held += inputSize(o)
		}
		if size := inputSize(j); held+size > limit {
			return &Problem{Message: fmt.Sprintf("user %s (uid %d) already has %s of job text pending or held; this job's %s more would pass schedd's limit (max_queued_input_per_user %s); wait for some to start, or remove some with bkill",
				j.User, j.UID, bytesText(held), bytesText(size), bytesText(limit))}
		}
	}
	return nil
}

// bytesText writes n bytes for a message: "64MiB" when round, else
// "70000 bytes".
func bytesText(n int) string {
	if s := units.FormatSize(int64(n)); s != strconv.Itoa(n) {
		return s
	}
	return strconv.Itoa(n) + " bytes"
}

// inputSize is what j's text costs schedd to keep, as the state counts
// it for its user's waiting jobs.
func inputSize(j *Job) int {
	n, _ := j.Spec.InputSize()
	return n
}

// qos resolves the job's QOS (the one it names, else its partition's
// default, else its account's) and refuses a walltime past the QOS's
// max_wall.
func (j *Job) qos(cfg *partition.Config, p *partition.Partition) []Problem {
	q, err := cfg.ResolveQOS(p, j.Account, j.Spec.QOS)
	if err != nil {
		return []Problem{j.problem("qos", "%v", err)}
	}
	j.QOS = q
	if qs := cfg.QOSByName(q); qs != nil && qs.MaxWall > 0 && (j.Walltime == 0 || j.Walltime > qs.MaxWall) {
		w := "none (unlimited)"
		if j.Walltime > 0 {
			w = units.FormatDuration(j.Walltime)
		}
		return []Problem{j.problem("walltime", "walltime %s exceeds qos %s's limit of %s (max_wall)", w, q, units.FormatDuration(qs.MaxWall))}
	}
	return nil
}

// reservation refuses a job naming a reservation that does not exist,
// or one whose user and account it does not admit (root and the admins
// are always admitted).
func (j *Job) reservation(req api.SubmitRequest, v View, name string) *Problem {
	users, accounts, ok := v.Reservation(name)
	if !ok {
		p := j.problem("reservation", "reservation %q does not exist (badmin reservation list shows those that do)", name)
		return &p
	}
	if req.UID == 0 || req.Admin || slices.Contains(users, req.User) || (j.Account != "" && slices.Contains(accounts, j.Account)) {
		return nil
	}
	who := "user " + req.User
	if j.Account != "" {
		who += " (account " + j.Account + ")"
	}
	admits := "only root and the admins"
	if len(users) > 0 || len(accounts) > 0 {
		admits = "users " + listOrNone(users) + ", accounts " + listOrNone(accounts)
	}
	p := j.problem("reservation", "%s may not run jobs in reservation %s; it admits %s", who, name, admits)
	return &p
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ",")
}
