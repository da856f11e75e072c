package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/attach"
)

// sessionCalls open a container's terminal and its apps.
type sessionCalls struct{ *conn }

// Attach opens the terminal stream of interactive job id's container
// host ("" main1): bsub -I and battach speak package attach over it.
func (c *sessionCalls) Attach(ctx context.Context, id uint64, host string) (io.ReadWriteCloser, error) {
	target := "/v1/jobs/" + strconv.FormatUint(id, 10) + "/attach"
	if host != "" {
		target += "?" + url.Values{"host": {host}}.Encode()
	}
	return c.upgrade(ctx, target)
}

// AttachRequests waits up to wait for attach requests for node.
func (c *nodeCalls) AttachRequests(ctx context.Context, node string, wait time.Duration) (api.AttachRequests, error) {
	var r api.AttachRequests
	_, err := c.Do(ctx, http.MethodGet, "/v1/nodes/"+url.PathEscape(node)+"/attach",
		url.Values{"wait": {wait.String()}}, nil, &r)
	return r, err
}

// AttachConnect opens node's end of attach request id.
func (c *nodeCalls) AttachConnect(ctx context.Context, node, id string) (io.ReadWriteCloser, error) {
	return c.upgrade(ctx, "/v1/nodes/"+url.PathEscape(node)+"/attach/"+url.PathEscape(id))
}

// upgrade POSTs to target asking for the attach protocol and returns
// the stream schedd switched to; it follows a follower's redirect to
// the leader and tries the other addresses as any call does. ctx bounds
// the stream's whole life.
func (c *conn) upgrade(ctx context.Context, target string) (io.ReadWriteCloser, error) {
	h := http.Header{}
	h.Set("Connection", "Upgrade")
	h.Set("Upgrade", attach.Upgrade)
	// schedd pairs the two ends before it answers (up to 15 s).
	resp, err := c.roundTrip(ctx, call{method: http.MethodPost, target: target, header: h, wait: 20 * time.Second})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		resp.Body.Close()
		return nil, fmt.Errorf("schedd answered %s instead of switching to the attach protocol", resp.Status)
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, fmt.Errorf("schedd switched protocols but the stream is not writable")
	}
	return rwc, nil
}
