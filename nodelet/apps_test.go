package nodelet

import (
	"context"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestDialAppRefuses: the nodelet dials only a declared service port of
// a main1 it runs, and only on a session network (the container's own
// namespace); anything else is refused before any dial.
func TestDialAppRefuses(t *testing.T) {
	job := api.AssignedJob{ID: 7, Spec: api.JobSpec{Services: []api.Service{{Name: "web", Port: 8000}}}}
	a := (&agent{cfg: Config{Name: "n1"}, log: testLog(), running: map[key]*task{
		{job: 7, host: "main1"}: {key: key{job: 7, host: "main1"}, job: job},
		{job: 7, host: "sub1"}:  {key: key{job: 7, host: "sub1"}, job: job},
	}}).wire()
	for _, tt := range []struct {
		req  api.AttachRequest
		want string
	}{
		{api.AttachRequest{JobID: 7, Host: "main1", Port: 22}, "declares no service on port 22"},
		{api.AttachRequest{JobID: 7, Host: "sub1", Port: 8000}, "served by main1"},
		{api.AttachRequest{JobID: 8, Host: "main1", Port: 8000}, "no container main1"},
		{api.AttachRequest{JobID: 7, Host: "main1", Port: 8000, Run: 1}, "no container main1"},
		// Declared, but this node shares its own network with containers:
		// 127.0.0.1 there is the node's.
		{api.AttachRequest{JobID: 7, Host: "main1", Port: 8000}, "serves no apps"},
	} {
		c, err := a.sessions.dialApp(context.Background(), tt.req)
		if c != nil {
			c.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("dialApp(%+v) = %v, want an error with %q", tt.req, err, tt.want)
		}
	}
}
