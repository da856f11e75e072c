package nodelet

import (
	"context"
	"io"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
)

// schedd is all the agent asks of the controller: *client.Client over
// HTTP in the nodelet; the package's tests put an in-memory fake in its
// place where a real schedd adds nothing (fakeschedd_test.go). Errors
// that client.IsNotFound and client.IsUnauthorized recognise mean what
// they mean from schedd's HTTP API.
type schedd interface {
	// Register announces the node; the answer carries its credential
	// (over TCP with a join token) and its first lease.
	Register(ctx context.Context, reg api.NodeRegister) (api.NodeRegistered, error)
	// Heartbeat tells schedd the node lives; the answer renews its lease.
	Heartbeat(ctx context.Context, node string, hb api.NodeHeartbeat) (api.NodeLease, error)
	// Assignments is what the node should run, waiting up to wait for
	// an answer past index (a blocking query).
	Assignments(ctx context.Context, node string, index uint64, wait time.Duration) (api.Assignments, error)
	// Report sends container state changes.
	Report(ctx context.Context, node string, rep api.ContainerReport) error
	// AttachRequests waits up to wait for terminal and app requests.
	AttachRequests(ctx context.Context, node string, wait time.Duration) (api.AttachRequests, error)
	// AttachConnect opens the stream of attach request id.
	AttachConnect(ctx context.Context, node, id string) (io.ReadWriteCloser, error)
	// SetToken sets the credential sent from now on.
	SetToken(token string)
}

var _ schedd = (*client.Client)(nil)

// dialSchedd is the schedd at cfg.Addr, sending token ("" none) rather
// than the one from the environment when join is set.
func dialSchedd(cfg Config, token string, join bool) (schedd, error) {
	if join {
		return client.NewWith(cfg.Addr, client.Options{CA: cfg.CA, Token: token})
	}
	return client.New(cfg.Addr)
}
