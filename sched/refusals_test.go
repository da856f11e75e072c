package sched

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/catalog"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/state"
)

// refusalsFile gives every partition rule admission enforces a partition
// to break it in: cpu's limits on each job and per user, gpu's accounts,
// and wide, which takes any job.
const refusalsFile = `
default_partition = "cpu"

partition "cpu" {
  nodes            = ["n[1-2]"]
  max_walltime     = "2h"
  default_walltime = "30m"
  max_cluster_size = 4
  allowed_modes    = ["single-node"]
  user_limits {
    max_submit_jobs = 2
    max_cpu         = 3
    max_memory      = "6GiB"
    max_gpu         = 1
  }
}

partition "gpu" {
  labels           = ["gpu"]
  allowed_accounts = ["vision"]
}

partition "wide" {
  nodes = ["n[1-2]"]
}

account "vision" {
  users = ["ada", "sam", "zed"]
}

account "ops" {
  users = ["bob"]
}
`

// A refusal case: the submission, who sends it, and what the refusal
// must hold: a problem whose message holds want, placed at pos ("" for
// none).
type refusalCase struct {
	name string
	user string
	req  api.SubmitRequest
	want string
	pos  string
}

// TestEveryRefusalAgrees: every refusal admission makes, each through
// the dry run's check (POST /v1/jobs/check, what bsub --dry-run asks),
// submit and batch submit against the real controller: all three refuse,
// with the same status, the same words and the same problems at the
// same file:line:col, and nothing is stored. A rule that only the
// state's apply enforced (a dry run that passes, a submit that fails)
// fails here.
func TestEveryRefusalAgrees(t *testing.T) {
	dir := t.TempDir()
	images := filepath.Join(dir, "images.hcl")
	if err := os.WriteFile(images, []byte("image \"pytorch-2.3\" {\n  source = \"/srv/images/pytorch-2.3.sif\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Load(images)
	if err != nil {
		t.Fatal(err)
	}
	parts := filepath.Join(dir, "partitions.hcl")
	if err := os.WriteFile(parts, []byte(refusalsFile), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, c := clusterWith(t, Config{PartitionsFile: parts, Images: cat, NodeTimeout: time.Hour,
		MaxJobInput: 16 << 10, MaxQueuedPerUser: 2, MaxQueuedInputPerUser: 8 << 10})
	register(t, c, "n1", 4)
	register(t, c, "n2", 4)
	ctx := context.Background()

	// What the dependencies name, and users at their limits: zed holds
	// two jobs waiting (max_queued_per_user 2): job 1, and job 2, an
	// array 1-4; sam has two jobs in cpu (max_submit_jobs 2).
	held := func(user, part string, array bool) uint64 {
		s := spec(1, jobspec.ModeSingleNode, 1)
		s.Partition = part
		if array {
			s.Array = &jobspec.Array{Range: "1-4"}
		}
		res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(s), User: user, UID: uidOf(user), GID: 1000, Hold: true})
		if err != nil {
			t.Fatalf("job of %s: %v", user, err)
		}
		return res.JobID
	}
	if id := held("zed", "wide", false); id != 1 {
		t.Fatalf("first job is %d", id)
	}
	held("zed", "wide", true)
	held("sam", "cpu", false)
	held("sam", "cpu", false)
	stored := len(srv.Store().Snapshot().Jobs())

	with := func(f func(*jobspec.Job)) jobspec.Job {
		s := spec(1, jobspec.ModeSingleNode, 1)
		f(&s)
		return s
	}
	file := func(body string) api.SubmitRequest {
		return api.SubmitRequest{Source: "job.hcl", JobFile: "job \"x\" {\n  image   = \"host\"\n  command = [\"true\"]\n" + body + "}\n"}
	}
	index := func(i int) *int { return &i }
	on := func(conds ...api.Condition) *api.Dependency { return &api.Dependency{Conditions: conds} }
	large := func(n int) jobspec.Job {
		return with(func(s *jobspec.Job) { s.Command = []string{"echo", strings.Repeat("x", n)} })
	}

	cases := []refusalCase{
		// The request itself (admission's parse).
		{"vars without a job file", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(*jobspec.Job) {})), Vars: map[string]string{"a": "1"}},
			"vars without a job_file", ""},
		{"spec and job file", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(*jobspec.Job) {})), JobFile: "job \"x\" {}\n"},
			"give a spec or a job_file, not both", ""},
		{"job file that does not parse", "ada", file("  colour = 3\n"),
			`An argument named "colour" is not expected here`, "job.hcl:4:3"},
		// The spec (jobspec.Validate, jobspec.CheckInput).
		{"invalid spec", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(s *jobspec.Job) { s.Resources.CPU = -1 }))},
			"cpu -1 is not valid", ""},
		{"cpu under the kernel's least quota", "ada", file("  resources {\n    cpu = 0.0004\n  }\n"),
			"cpu 0.0004 is not valid; the least a container may have is 0.01 (10 millicores", "job.hcl:5:11"},
		// Small enough that the nodes could hold all 300 containers.
		{"session past its network", "ada", file("  partition = \"wide\"\n  cluster {\n    size = 300\n    mode = \"multi-node\"\n  }\n  resources {\n    cpu    = 0.01\n    memory = \"16MiB\"\n  }\n"),
			"cluster size 300 is not valid; use 1 (main1 alone) to 253 containers", "job.hcl:6:12"},
		{"job text over max_job_input", "ada", api.SubmitRequest{Spec: wire.ToAPI(large(20 << 10))},
			"over schedd's limit (max_job_input)", ""},
		// The request against schedd (cwd, image, partition, account,
		// dependency, interactive).
		{"relative cwd", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(*jobspec.Job) {})), Cwd: "here"},
			"the submit directory must be an absolute path", ""},
		{"image not in the catalog", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(s *jobspec.Job) { s.Image = "tf-2.15" }))},
			`image "tf-2.15": unknown image`, ""},
		{"unknown partition", "ada", file("  partition = \"nope\"\n"),
			`partition "nope" does not exist; known partitions: cpu, gpu, wide`, "job.hcl:4:15"},
		{"not a member of the account", "bob", api.SubmitRequest{Spec: wire.ToAPI(with(func(s *jobspec.Job) { s.Account = "vision" }))},
			`user "bob" is not a member of account "vision"`, ""},
		{"a member of no account", "eve", api.SubmitRequest{Spec: wire.ToAPI(with(func(*jobspec.Job) {}))},
			`user "eve" is a member of no account`, ""},
		{"malformed dependency", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(*jobspec.Job) {})), DependsOn: on(api.Condition{Kind: "later", JobID: 1})},
			`dependency condition "later": want done, exit, ended or started`, ""},
		{"dependency on no job", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(*jobspec.Job) {})), DependsOn: on(api.Condition{Kind: api.DepDone, JobID: 99})},
			"job 99 does not exist", ""},
		{"element of no array", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(*jobspec.Job) {})), DependsOn: on(api.Condition{Kind: api.DepDone, JobID: 1, Index: index(2)})},
			"job 1 is not a job array", ""},
		{"element an array lacks", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(*jobspec.Job) {})), DependsOn: on(api.Condition{Kind: api.DepDone, JobID: 2, Index: index(9)})},
			"array 2 has no element 9", ""},
		{"interactive array", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(s *jobspec.Job) { s.Array = &jobspec.Array{Range: "1-2"} })), Interactive: true},
			"a job array cannot be interactive", ""},
		// The partition's limits on each job.
		{"account the partition does not take", "bob", file("  partition = \"gpu\"\n"),
			"partition gpu does not take jobs of account ops", ""}, // the file wrote no account
		{"cluster mode", "ada", file("  cluster {\n    size = 2\n    mode = \"multi-node\"\n  }\n"),
			"cluster mode multi-node is not allowed in partition cpu", "job.hcl:6:12"},
		{"cluster size", "ada", file("  cluster {\n    size = 6\n  }\n"),
			"cluster size 6 exceeds partition cpu's limit of 4 (max_cluster_size)", "job.hcl:5:12"},
		{"walltime", "ada", file("  walltime = \"3h\"\n"),
			"walltime 3h exceeds partition cpu's limit of 2h (max_walltime)", "job.hcl:4:14"},
		// The partition's per-user limits, on one job alone.
		{"user cpu cap", "ada", file("  resources {\n    cpu = 4\n  }\n"),
			"the job needs 4 cpus; partition cpu lets one user hold 3 (user_limits.max_cpu)", "job.hcl:5:11"},
		{"user memory cap", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(s *jobspec.Job) { s.Resources.Memory = 8 << 30 }))},
			"partition cpu lets one user hold 6GiB (user_limits.max_memory)", ""},
		{"user gpu cap", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(s *jobspec.Job) { s.Resources.GPU = 2 }))},
			"the job needs 2 gpus; partition cpu lets one user hold 1 (user_limits.max_gpu)", ""},
		{"max_submit_jobs", "sam", api.SubmitRequest{Spec: wire.ToAPI(with(func(*jobspec.Job) {}))},
			"user sam already has 2 jobs queued or running in partition cpu, its limit (user_limits.max_submit_jobs 2)", ""},
		// schedd's queue limits.
		{"max_queued_per_user", "zed", api.SubmitRequest{Spec: wire.ToAPI(with(func(s *jobspec.Job) { s.Partition = "wide" }))},
			"already has 2 jobs pending or held, schedd's limit (max_queued_per_user 2)", ""},
		{"max_queued_input_per_user", "ada", api.SubmitRequest{Spec: wire.ToAPI(large(10 << 10))},
			"(max_queued_input_per_user 8KiB)", ""},
		// The nodes.
		{"never fits", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(s *jobspec.Job) { s.Partition = "wide"; s.Resources.Memory = 20 << 30 }))},
			"job can never run in partition wide", ""},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) { checkAgree(t, c, tt) })
	}
	if n := len(srv.Store().Snapshot().Jobs()); n != stored {
		t.Errorf("%d jobs stored, %d before the refused submissions", n, stored)
	}

	// max_queued counts every user's waiting jobs: a schedd of its own.
	_, c1 := clusterWith(t, Config{MaxQueued: 1})
	if _, err := c1.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), User: "zed", UID: 1001, GID: 1000, Hold: true}); err != nil {
		t.Fatal(err)
	}
	checkAgree(t, c1, refusalCase{name: "max_queued", user: "ada", req: api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1))},
		want: "schedd already holds 1 jobs pending or held, its limit for all users together (max_queued 1)"})
}

// uids are the test's users' ids: the queue limits count by uid.
var uids = map[string]int{"ada": 1000, "zed": 1001, "sam": 1002, "bob": 1003, "eve": 1004}

func uidOf(user string) int { return uids[user] }

// checkAgree sends tt through the check, submit and batch submit, and
// requires the same refusal from each, holding tt's problem.
func checkAgree(t *testing.T, c *client.Client, tt refusalCase) {
	t.Helper()
	ctx := context.Background()
	req := tt.req
	req.User, req.UID, req.GID = tt.user, uidOf(tt.user), 1000
	var answers [3]*client.APIError
	for i, err := range []error{
		second(c.CheckSubmit(ctx, req)),
		second(c.Submit(ctx, req)),
		second(c.SubmitBatch(ctx, []api.SubmitRequest{req})),
	} {
		what := [...]string{"check (the dry run)", "submit", "batch submit"}[i]
		if !errors.As(err, &answers[i]) || answers[i].Status/100 != 4 {
			t.Fatalf("%s: %v, want a refusal", what, err)
		}
	}
	chk, sub, batch := answers[0], answers[1], answers[2]
	if chk.Status != sub.Status || chk.Message != sub.Message || !reflect.DeepEqual(chk.Problems, sub.Problems) {
		t.Fatalf("the dry run and submit disagree:\ncheck:  %d %q %+v\nsubmit: %d %q %+v", chk.Status, chk.Message, chk.Problems, sub.Status, sub.Message, sub.Problems)
	}
	if batch.Status != sub.Status || !strings.HasSuffix(batch.Message, strings.TrimPrefix(sub.Message, "invalid request: ")) || !reflect.DeepEqual(batch.Problems, sub.Problems) {
		t.Fatalf("batch submit and submit disagree:\nbatch:  %d %q %+v\nsubmit: %d %q %+v", batch.Status, batch.Message, batch.Problems, sub.Status, sub.Message, sub.Problems)
	}
	found := false
	for _, p := range sub.Problems {
		if strings.Contains(p.Message, tt.want) {
			found = true
			if p.Position != tt.pos {
				t.Errorf("problem %q placed at %q, want %q", p.Message, p.Position, tt.pos)
			}
		}
	}
	if !found && !(len(sub.Problems) == 0 && strings.Contains(sub.Message, tt.want)) {
		t.Errorf("refusal %q %+v holds no problem %q", sub.Message, sub.Problems, tt.want)
	}
}

// second is f's error, its answer dropped.
func second[T any](_ T, err error) error { return err }

// TestSessionBoundIsOne: the state's apply refuses a session over
// state.MaxSessionSize only for entries logged before submission knew
// the bound; submission refuses by jobspec.MaxClusterSize, the same
// number, so no job it takes is refused at commit.
func TestSessionBoundIsOne(t *testing.T) {
	if state.MaxSessionSize != jobspec.MaxClusterSize {
		t.Fatalf("apply bounds a session at %d containers, submission at %d", state.MaxSessionSize, jobspec.MaxClusterSize)
	}
}
