package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// nodeCalls are the calls about nodes: the node list and drains, and a
// node agent's registration, heartbeat, assignments, reports and attach
// requests.
type nodeCalls struct{ *conn }

// Nodes lists nodes.
func (c *nodeCalls) Nodes(ctx context.Context) (api.NodeList, error) {
	var r api.NodeList
	_, err := c.Do(ctx, http.MethodGet, "/v1/nodes", nil, nil, &r)
	return r, err
}

// Drain drains nodes, or with d.Resume returns them to service
// (administrators only); the answer lists them afterwards.
func (c *nodeCalls) Drain(ctx context.Context, d api.NodeDrain) (api.NodeList, error) {
	var r api.NodeList
	_, err := c.Do(ctx, http.MethodPost, "/v1/nodes/drain", nil, d, &r)
	return r, err
}

// Register announces a nodelet: the answer is the node as schedd keeps
// it (its Credential, over TCP with a join token) and its first lease.
func (c *nodeCalls) Register(ctx context.Context, reg api.NodeRegister) (api.NodeRegistered, error) {
	var r api.NodeRegistered
	_, err := c.Do(ctx, http.MethodPost, "/v1/nodes/register", nil, reg, &r)
	return r, err
}

// Heartbeat tells schedd the node is alive; the answer renews its lease.
func (c *nodeCalls) Heartbeat(ctx context.Context, node string, hb api.NodeHeartbeat) (api.NodeLease, error) {
	var l api.NodeLease
	_, err := c.Do(ctx, http.MethodPost, "/v1/nodes/"+url.PathEscape(node)+"/heartbeat", nil, hb, &l)
	return l, err
}

// Assignments returns what node should run, blocking past index.
func (c *nodeCalls) Assignments(ctx context.Context, node string, index uint64, wait time.Duration) (api.Assignments, error) {
	var r api.Assignments
	idx, err := c.Do(ctx, http.MethodGet, "/v1/nodes/"+url.PathEscape(node)+"/assignments", blocking(index, wait), nil, &r)
	if r.Index == 0 {
		r.Index = idx
	}
	return r, err
}

// Report sends container state changes.
func (c *nodeCalls) Report(ctx context.Context, node string, rep api.ContainerReport) error {
	_, err := c.Do(ctx, http.MethodPost, "/v1/nodes/"+url.PathEscape(node)+"/status", nil, rep, nil)
	return err
}
