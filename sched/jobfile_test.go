package sched

import (
	"context"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// TestSubmitJobFile: a submission may carry a job file's text, which
// schedd parses as bsub would: variables apply, and an error names the
// file's line and column.
func TestSubmitJobFile(t *testing.T) {
	_, c := cluster(t)
	ctx := context.Background()
	file := "variable \"n\" { default = 1 }\njob \"from-text\" {\n  image   = \"host\"\n  command = [\"true\"]\n  cluster { size = var.n }\n}\n"
	res, err := c.Submit(ctx, api.SubmitRequest{JobFile: file, Source: "text.hcl", Vars: map[string]string{"n": "2"}, Cwd: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := c.Job(ctx, res.JobID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if j.Name != "from-text" || j.Spec.Cluster.Size != 2 || len(j.Containers) != 2 {
		t.Errorf("job from text: name %q, size %d, %d containers; want from-text, 2, 2", j.Name, j.Spec.Cluster.Size, len(j.Containers))
	}

	for _, tc := range []struct {
		req  api.SubmitRequest
		want string
	}{
		{api.SubmitRequest{JobFile: "job \"x\" {\n  image = \"host\"\n  command = [\"true\"]\n  cluster { size = -1 }\n}\n", Source: "bad.hcl", Cwd: "/tmp"}, "bad.hcl:4:"},
		{api.SubmitRequest{JobFile: "job \"x\" {\n  image = \n", Cwd: "/tmp"}, "job.hcl:2:"},
		{api.SubmitRequest{JobFile: file, Spec: wire.ToAPI(spec(1, "single-node", 1)), Cwd: "/tmp"}, "not both"},
		{api.SubmitRequest{Vars: map[string]string{"n": "2"}, Spec: wire.ToAPI(spec(1, "single-node", 1)), Cwd: "/tmp"}, "vars without a job_file"},
	} {
		_, err := c.Submit(ctx, tc.req)
		var ae *client.APIError
		if !asAPI(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, tc.want) {
			t.Errorf("submitting %q: %v; want a 400 naming %q", tc.req.JobFile, err, tc.want)
		}
	}
}
