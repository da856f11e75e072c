package admission_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/admission"
	"github.com/troupe-hpc/troupe/sched/partition"
)

const partitions = `
default_partition = "cpu"

partition "cpu" {
  nodes            = ["n[1-2]"]
  max_walltime     = "2h"
  default_walltime = "30m"
  max_cluster_size = 4
  allowed_modes    = ["single-node"]
  user_limits {
    max_cpu         = 3
    max_submit_jobs = 2
  }
}
`

// view is a state of a few jobs, as admission reads one. The real one
// (sched's, over the replicated state) is exercised by sched's tests
// through the API; this one lets the rules be tested on their own.
type view struct {
	cfg     *partition.Config
	jobs    map[uint64]admission.Target
	queued  int
	mine    int // the user's queued jobs
	input   int // the bytes of text of the user's queued jobs
	submits int // the user's jobs in cpu not ended
	never   string
	resv    map[string][2][]string // reservation → users, accounts
}

func (v *view) Config() *partition.Config { return v.cfg }
func (v *view) Queued() int               { return v.queued }
func (v *view) QueuedOf(int) int          { return v.mine }
func (v *view) QueuedInputOf(int) int     { return v.input }
func (v *view) Submitted(string, string) int {
	return v.submits
}
func (v *view) NeverFits(*admission.Job) string { return v.never }
func (v *view) Target(id uint64) (admission.Target, bool) {
	t, ok := v.jobs[id]
	return t, ok
}
func (v *view) LastJobID() uint64 { return uint64(len(v.jobs)) }
func (v *view) Reservation(name string) (users, accounts []string, ok bool) {
	r, ok := v.resv[name]
	return r[0], r[1], ok
}

func newView(t *testing.T) *view {
	t.Helper()
	cfg, diags := partition.Parse("partitions.hcl", []byte(partitions))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	arr, err := jobspec.ArrayFromSpec("1-4")
	if err != nil {
		t.Fatal(err)
	}
	indices, err := arr.Indices()
	if err != nil {
		t.Fatal(err)
	}
	return &view{cfg: cfg, jobs: map[uint64]admission.Target{1: {}, 2: {Array: true, Indices: indices}}}
}

const jobFile = `job "train" {
  walltime = "3h"
  image    = "host"
  command  = ["true"]
  cluster {
    size = 2
  }
  resources {
    cpu    = 2
    memory = "1GiB"
  }
}
`

// fromFile is a submission of src as bsub makes it: parsed here, sent
// with the positions of the parse.
func fromFile(t *testing.T, src string) api.SubmitRequest {
	t.Helper()
	spec, diags := jobspec.Parse("train.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return api.SubmitRequest{Spec: wire.ToAPI(*spec), Source: "train.hcl", Positions: wire.PositionsOf(spec), User: "ada", UID: 1000, GID: 1000, Cwd: "/home/ada"}
}

func refusal(t *testing.T, err error) *admission.Refusal {
	t.Helper()
	var r *admission.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("%v: want a *Refusal", err)
	}
	return r
}

// Every problem is listed, each with its path and the place the file
// wrote the setting; one the file did not write has none.
func TestAdmitPlacesEveryProblem(t *testing.T) {
	_, err := admission.Admit(fromFile(t, jobFile), newView(t), admission.Settings{}, nil)
	r := refusal(t, err)
	want := []api.Problem{
		{Path: "walltime", Position: "train.hcl:2:14", Message: "walltime 3h exceeds partition cpu's limit of 2h (max_walltime)"},
		{Path: "resources.cpu", Position: "train.hcl:9:14", Message: "the job needs 4 cpus; partition cpu lets one user hold 3 (user_limits.max_cpu)"},
	}
	got := r.API()
	if len(got) != len(want) {
		t.Fatalf("problems %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("problem %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if r.QueueFull || r.Error() != want[0].String()+"; "+want[1].String() {
		t.Errorf("refusal %q (queue full %v)", r.Error(), r.QueueFull)
	}

	// A setting a flag changed has no range: its problem no position.
	req := fromFile(t, jobFile)
	delete(req.Positions, "walltime")
	r = refusal(t, firstErr(admission.Admit(req, newView(t), admission.Settings{}, nil)))
	if p := r.Problems[0]; p.Path != "walltime" || p.Position() != "" {
		t.Errorf("walltime without a range: %+v", p)
	}
}

func firstErr(_ *admission.Job, err error) error { return err }

// A job file's text is parsed as bsub parses one: its errors are placed.
func TestAdmitJobFile(t *testing.T) {
	req := api.SubmitRequest{JobFile: "job \"x\" {\n  image = \"host\"\n  colour = 3\n}\n", Source: "x.hcl", User: "ada", UID: 1000}
	r := refusal(t, firstErr(admission.Admit(req, newView(t), admission.Settings{}, nil)))
	if len(r.Problems) != 2 || !strings.HasPrefix(r.Problems[1].String(), "x.hcl:3:3: Unsupported argument") {
		t.Fatalf("%q", r.Error())
	}
	req.JobFile = strings.Replace(jobFile, `walltime = "3h"`, `walltime = "1h"`, 1)
	req.JobFile = strings.Replace(req.JobFile, "cpu    = 2", "cpu    = 1", 1)
	j, err := admission.Admit(req, newView(t), admission.Settings{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if j.Partition != "cpu" || len(j.Containers) != 2 || j.Walltime.String() != "1h0m0s" || j.Source != "x.hcl" {
		t.Fatalf("admitted %+v", j)
	}
	// The partition's default walltime fills one the job leaves out.
	req.JobFile = strings.Replace(req.JobFile, `  walltime = "1h"`+"\n", "", 1)
	if j, err = admission.Admit(req, newView(t), admission.Settings{}, nil); err != nil || j.Walltime.String() != "30m0s" {
		t.Fatalf("admitted %+v, %v", j, err)
	}
}

// The queue limits count the jobs ahead in the batch and refuse as
// QueueFull; max_submit_jobs counts them too but is a partition limit.
func TestAdmitQueueLimits(t *testing.T) {
	req := fromFile(t, strings.Replace(strings.Replace(jobFile, `"3h"`, `"1h"`, 1), "cpu    = 2", "cpu    = 1", 1))
	v := newView(t)
	v.mine = 1
	set := admission.Settings{MaxQueuedPerUser: 2}
	first, err := admission.Admit(req, v, set, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = admission.Admit(req, v, set, []*admission.Job{first})
	if r := refusal(t, err); !r.QueueFull || !strings.Contains(r.Error(), "already has 2 jobs pending or held, schedd's limit (max_queued_per_user 2)") {
		t.Fatalf("second of the batch: %v (queue full %v)", err, r.QueueFull)
	}
	v.mine, v.submits = 0, 1
	_, err = admission.Admit(req, v, admission.Settings{}, []*admission.Job{first})
	if r := refusal(t, err); r.QueueFull || !strings.Contains(r.Error(), "already has 2 jobs queued or running in partition cpu, its limit (user_limits.max_submit_jobs 2)") {
		t.Fatalf("max_submit_jobs: %v", err)
	}
	v.submits, v.never = 0, "job can never run in partition cpu"
	_, err = admission.Admit(req, v, admission.Settings{}, nil)
	if r := refusal(t, err); r.Problems[0].Path != "resources" || r.Problems[0].Position() != "train.hcl:8:3" {
		t.Fatalf("never fits: %+v", r.Problems)
	}
}

// The text a user's waiting jobs hold together is capped: a job that
// would take them past max_queued_input_per_user is refused as QueueFull
// with the limit's name, the jobs ahead in the batch counted; below it,
// or unlimited, it is taken.
func TestAdmitQueuedInputLimit(t *testing.T) {
	req := fromFile(t, strings.Replace(strings.Replace(jobFile, `"3h"`, `"1h"`, 1), "cpu    = 2", "cpu    = 1", 1))
	v := newView(t)
	first, err := admission.Admit(req, v, admission.Settings{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	size, _ := first.Spec.InputSize()
	set := admission.Settings{MaxQueuedInputPerUser: 10 * size}
	v.input = 9 * size
	if _, err := admission.Admit(req, v, set, nil); err != nil {
		t.Fatalf("up to the limit: %v", err)
	}
	_, err = admission.Admit(req, v, set, []*admission.Job{first})
	if r := refusal(t, err); !r.QueueFull || !strings.Contains(r.Error(), "max_queued_input_per_user") || !strings.Contains(r.Error(), "of job text pending or held") {
		t.Fatalf("past the limit with the batch: %v", err)
	}
	v.input = 10*size - 1
	if _, err := admission.Admit(req, v, set, nil); err == nil {
		t.Fatal("a job one byte past the limit was taken")
	}
	if _, err := admission.Admit(req, v, admission.Settings{}, nil); err != nil {
		t.Fatalf("unlimited: %v", err)
	}
}

// The partition limits list every one a job breaks; the scheduling pass
// asks the same of queued jobs.
func TestPartitionLimits(t *testing.T) {
	cfg := newView(t).cfg
	p := cfg.Partition("cpu")
	if got := admission.PartitionLimits(cfg, p, admission.Shape{Containers: 4, Walltime: 2 * 3600e9}); got != nil {
		t.Fatalf("at the limits: %+v", got)
	}
	got := admission.PartitionLimits(cfg, p, admission.Shape{Mode: jobspec.ModeMultiNode, Containers: 5, Walltime: 3 * 3600e9})
	var paths []string
	for _, pr := range got {
		paths = append(paths, pr.Path)
	}
	if strings.Join(paths, " ") != "cluster.mode cluster.size walltime" {
		t.Fatalf("problems %+v", got)
	}
}

func TestCheckDependency(t *testing.T) {
	v := newView(t)
	idx := func(i int) *int { return &i }
	for _, tt := range []struct {
		name  string
		conds []api.Condition
		want  string
	}{
		{"job", []api.Condition{{Kind: api.DepDone, JobID: 1}}, ""},
		{"element", []api.Condition{{Kind: api.DepEnded, JobID: 2, Index: idx(3)}}, ""},
		{"no job", []api.Condition{{Kind: api.DepDone, JobID: 9}}, "dependency done(9): job 9 does not exist (the last job is 2)"},
		{"not an array", []api.Condition{{Kind: api.DepDone, JobID: 1, Index: idx(1)}}, "dependency done(1[1]): job 1 is not a job array"},
		{"no element", []api.Condition{{Kind: api.DepDone, JobID: 2, Index: idx(7)}}, "dependency done(2[7]): array 2 has no element 7 (its indices: 1-4)"},
		{"no conditions", nil, "dependency without conditions"},
		{"bad kind", []api.Condition{{Kind: "afterok", JobID: 1}}, `dependency condition "afterok": want done, exit, ended or started`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := admission.CheckDependency(&api.Dependency{Conditions: tt.conds}, v)
			if got := ""; err != nil {
				got = err.Error()
				if got != tt.want {
					t.Fatalf("%q, want %q", got, tt.want)
				}
			} else if tt.want != "" {
				t.Fatalf("taken, want %q", tt.want)
			}
			if tt.name == "no job" && !errors.Is(err, admission.ErrNoJob) {
				t.Errorf("%v is not ErrNoJob", err)
			}
		})
	}
}

// TestUserCapsCountsAsJobsDo: a per-user cpu limit is counted in
// millicores by the rule a job's cpu is, so a job asking exactly the
// limit is within it, and one a millicore over it is not.
func TestUserCapsCountsAsJobsDo(t *testing.T) {
	cfg, diags := partition.Parse("partitions.hcl", []byte("partition \"cpu\" {\n  nodes = [\"n1\"]\n  user_limits {\n    max_cpu = 2.9999\n  }\n}\n"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p := cfg.Partition("cpu")
	one := func(cpu float64) []jobspec.Container {
		return []jobspec.Container{{Resources: jobspec.Resources{CPU: cpu, Memory: 1 << 30}}}
	}
	if pr := admission.UserCaps(p, one(2.9999)); pr != nil {
		t.Errorf("a job of cpu 2.9999 under max_cpu 2.9999: %s", pr)
	}
	if pr := admission.UserCaps(p, one(3.001)); pr == nil || pr.Path != "resources.cpu" {
		t.Errorf("a job of cpu 3.001 under max_cpu 2.9999: %v, want a resources.cpu problem", pr)
	}
}

// A job naming a reservation is admitted only for the users and accounts
// it admits, root and admins; an unknown one is refused by name.
func TestAdmitReservation(t *testing.T) {
	v := newView(t)
	v.resv = map[string][2][]string{"course": {{"bob"}, {"teach"}}, "pm": {nil, nil}}
	req := func(user string, uid int, resv string) api.SubmitRequest {
		spec, diags := jobspec.Parse("j.hcl", []byte("job \"j\" {\n  image = \"host\"\n  command = [\"true\"]\n  walltime = \"1h\"\n  reservation = \""+resv+"\"\n}\n"))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return api.SubmitRequest{Spec: wire.ToAPI(*spec), Source: "j.hcl", Positions: wire.PositionsOf(spec), User: user, UID: uid, GID: uid, Cwd: "/home/" + user}
	}
	if _, err := admission.Admit(req("bob", 1001, "course"), v, admission.Settings{}, nil); err != nil {
		t.Errorf("bob, admitted by name: %v", err)
	}
	if _, err := admission.Admit(req("root", 0, "pm"), v, admission.Settings{}, nil); err != nil {
		t.Errorf("root: %v", err)
	}
	admin := req("ops", 1003, "pm")
	admin.Admin = true
	if _, err := admission.Admit(admin, v, admission.Settings{}, nil); err != nil {
		t.Errorf("an admin: %v", err)
	}
	_, err := admission.Admit(req("ada", 1000, "course"), v, admission.Settings{}, nil)
	if p := refusal(t, err).API(); len(p) != 1 || p[0].Path != "reservation" || p[0].Position != "j.hcl:5:17" ||
		!strings.Contains(p[0].Message, "user ada may not run jobs in reservation course; it admits users bob, accounts teach") {
		t.Errorf("ada in course: %+v", p)
	}
	_, err = admission.Admit(req("ada", 1000, "gone"), v, admission.Settings{}, nil)
	if p := refusal(t, err).API(); len(p) != 1 || !strings.Contains(p[0].Message, `reservation "gone" does not exist`) {
		t.Errorf("unknown reservation: %+v", p)
	}
}
