package sched

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// bigJob breaks three of limitsFile's cpu limits: walltime (line 4),
// cluster size (line 6), and the user cpu cap its six containers of the
// default 1 cpu exceed together (a setting the file leaves out: no
// position).
const bigJob = `job "big" {
  partition = "cpu"
  image     = "host"
  walltime  = "3h"
  cluster {
    size = 6
  }
  command = ["true"]
}
`

// The problems schedd finds in bigJob, placed in big.hcl.
var bigProblems = []api.Problem{
	{Path: "cluster.size", Position: "big.hcl:6:12", Message: "cluster size 6 exceeds partition cpu's limit of 4 (max_cluster_size)"},
	{Path: "walltime", Position: "big.hcl:4:15", Message: "walltime 3h exceeds partition cpu's limit of 2h (max_walltime)"},
	{Path: "resources.cpu", Message: "the job needs 6 cpus; partition cpu lets one user hold 3 (user_limits.max_cpu)"},
}

// TestRefusalNamesJobFile: a job from a file that breaks a partition's
// limits is refused by the real server with every problem placed at its
// file:line:col, whether schedd parsed the file (job_file) or the client
// did and sent the positions of its parse along (bsub, the web page);
// submit, batch submit and the dry run's check say the same; a spec from
// no file is refused in the same words, unplaced.
func TestRefusalNamesJobFile(t *testing.T) {
	srv, c, _ := partitioned(t, limitsFile, nil)
	register(t, c, "n1", 4)
	ctx := context.Background()
	parsed, diags := jobspec.Parse("big.hcl", []byte(bigJob))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want := "invalid request: " + bigProblems[0].String() + "; " + bigProblems[1].String() + "; " + bigProblems[2].String()
	for _, tt := range []struct {
		name string
		req  api.SubmitRequest
	}{
		{"job_file", api.SubmitRequest{JobFile: bigJob, Source: "big.hcl"}},
		{"spec with positions", api.SubmitRequest{Spec: wire.ToAPI(*parsed), Source: "big.hcl", Positions: wire.PositionsOf(parsed)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.User, tt.req.UID, tt.req.GID = "ada", 1000, 1000
			_, err := c.Submit(ctx, tt.req)
			checkRefusal(t, "submit", err, want, bigProblems)
			_, err = c.CheckSubmit(ctx, tt.req)
			checkRefusal(t, "check", err, want, bigProblems)
			_, err = c.SubmitBatch(ctx, []api.SubmitRequest{tt.req})
			checkRefusal(t, "batch", err, "job 1 of 1 (big.hcl): "+want, bigProblems)
		})
	}
	// Without a file the words are the same, with no position.
	_, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(*parsed), User: "ada", UID: 1000, GID: 1000})
	unplaced := slices.Clone(bigProblems)
	var words []string
	for i := range unplaced {
		unplaced[i].Position = ""
		words = append(words, unplaced[i].Message)
	}
	checkRefusal(t, "submit without positions", err, "invalid request: "+strings.Join(words, "; "), unplaced)
	if n := len(srv.Store().Snapshot().Jobs()); n != 0 {
		t.Fatalf("%d jobs stored by refused submissions", n)
	}
}

func checkRefusal(t *testing.T, what string, err error, want string, problems []api.Problem) {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 400 {
		t.Fatalf("%s: %v, want a 400", what, err)
	}
	if ae.Message != want {
		t.Errorf("%s: %q\nwant %q", what, ae.Message, want)
	}
	if len(ae.Problems) != len(problems) {
		t.Fatalf("%s: problems %+v, want %+v", what, ae.Problems, problems)
	}
	for i := range problems {
		if ae.Problems[i] != problems[i] {
			t.Errorf("%s: problem %d is %+v, want %+v", what, i, ae.Problems[i], problems[i])
		}
	}
}

// TestCheckAgreesWithSubmit: over a table of jobs, the dry run's check
// (POST /v1/jobs/check) and submit (POST /v1/jobs) give the same verdict
// and the same words, through the one admission; what the check takes,
// submit stores in the same partition and account.
func TestCheckAgreesWithSubmit(t *testing.T) {
	srv, c, _ := partitioned(t, limitsFile, nil)
	register(t, c, "n1", 4)
	register(t, c, "n2", 4)
	ctx := context.Background()
	with := func(f func(*jobspec.Job)) jobspec.Job {
		s := spec(1, jobspec.ModeSingleNode, 1)
		f(&s)
		return s
	}
	tests := []struct {
		name string
		user string
		req  api.SubmitRequest
	}{
		{"fits", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(*jobspec.Job) {}))}},
		{"gpu partition", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(s *jobspec.Job) { s.Partition = "gpu" }))}},
		{"cluster size", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(s *jobspec.Job) { s.Cluster.Size = 6 }))}},
		{"walltime and mode", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(s *jobspec.Job) {
			s.Walltime, s.Cluster.Mode, s.Cluster.Size = 1<<62, jobspec.ModeMultiNode, 2
		}))}},
		{"account", "bob", api.SubmitRequest{Spec: wire.ToAPI(with(func(s *jobspec.Job) { s.Partition = "gpu" }))}},
		{"no account", "eve", api.SubmitRequest{Spec: wire.ToAPI(with(func(*jobspec.Job) {}))}},
		{"user cpu cap", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(s *jobspec.Job) { s.Resources.CPU = 4 }))}},
		{"never fits", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(s *jobspec.Job) { s.Resources.Memory = 20 << 30 }))}},
		{"unknown partition", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(s *jobspec.Job) { s.Partition = "nope" }))}},
		{"unknown dependency", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(*jobspec.Job) {})),
			DependsOn: &api.Dependency{Conditions: []api.Condition{{Kind: api.DepDone, JobID: 99}}}}},
		{"relative cwd", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(*jobspec.Job) {})), Cwd: "here"}},
		{"invalid spec", "ada", api.SubmitRequest{Spec: wire.ToAPI(with(func(s *jobspec.Job) { s.Resources.CPU = -1 }))}},
		{"job file", "ada", api.SubmitRequest{JobFile: bigJob, Source: "big.hcl"}},
		{"bad job file", "ada", api.SubmitRequest{JobFile: "job \"x\" {\n  colour = 3\n}\n", Source: "bad.hcl"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req
			req.User, req.UID, req.GID = tt.user, 1000, 1000
			chk, cerr := c.CheckSubmit(ctx, req)
			res, serr := c.Submit(ctx, req)
			if (cerr == nil) != (serr == nil) {
				t.Fatalf("check says %v, submit %v", cerr, serr)
			}
			if serr != nil {
				if cerr.Error() != serr.Error() {
					t.Fatalf("check says %q\nsubmit says %q", cerr, serr)
				}
				return
			}
			j := srv.Store().Snapshot().Job(res.JobID)
			if j == nil || j.Partition != chk.Partition || j.Account != chk.Account || j.Walltime != chk.Walltime {
				t.Fatalf("check answered %+v, submit stored %+v", chk, j)
			}
		})
	}
}
