// Package session turns a job and one of its hostnames into what that
// container sees: its environment, /etc/hosts, /etc/hostname and the
// path its output goes to. Everything here is a pure function of
// (api.AssignedJob, host); the nodelet writes the files and opens the output.
//
// Of troupe it imports internal/api, internal/hostlist and jobspec only;
// it must not import the agent (package nodelet), a runtime or
// sched/....
package session

import (
	"errors"
	"fmt"

	"github.com/troupe-hpc/troupe/internal/api"
)

// ErrNoSuchHost: the job has no container with that hostname.
var ErrNoSuchHost = errors.New("no such container in session")

// Container returns the container of job named host.
func Container(job api.AssignedJob, host string) (api.Container, error) {
	if c, ok := job.Container(host); ok {
		return c, nil
	}
	return api.Container{}, fmt.Errorf("job %d host %s: %w", job.ID, host, ErrNoSuchHost)
}
