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

// Attach opens the terminal stream of interactive job id's container
// host ("" main1): bsub -I and battach speak package attach over it.
func (c *Client) Attach(ctx context.Context, id uint64, host string) (io.ReadWriteCloser, error) {
	target := "/v1/jobs/" + strconv.FormatUint(id, 10) + "/attach"
	if host != "" {
		target += "?" + url.Values{"host": {host}}.Encode()
	}
	return c.upgrade(ctx, target)
}

// AttachRequests waits up to wait for attach requests for node.
func (c *Client) AttachRequests(ctx context.Context, node string, wait time.Duration) (api.AttachRequests, error) {
	var r api.AttachRequests
	_, err := c.Do(ctx, http.MethodGet, "/v1/nodes/"+url.PathEscape(node)+"/attach",
		url.Values{"wait": {wait.String()}}, nil, &r)
	return r, err
}

// AttachConnect opens node's end of attach request id.
func (c *Client) AttachConnect(ctx context.Context, node, id string) (io.ReadWriteCloser, error) {
	return c.upgrade(ctx, "/v1/nodes/"+url.PathEscape(node)+"/attach/"+url.PathEscape(id))
}

// upgrade POSTs to target asking for the attach protocol and returns
// the stream schedd switched to; it follows a follower's redirect to
// the leader. ctx bounds the stream's whole life.
func (c *Client) upgrade(ctx context.Context, target string) (io.ReadWriteCloser, error) {
	u := c.bases[int(c.cur.Load())] + target
	for hop := 0; hop < 5; hop++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", attach.Upgrade)
		if t := *c.token.Load(); t != "" && req.URL.Host != "schedd" {
			req.Header.Set("Authorization", "Bearer "+t)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%w at %s: %v", ErrUnreachable, c.addr, unwrapDial(err))
		}
		switch resp.StatusCode {
		case http.StatusSwitchingProtocols:
			rwc, ok := resp.Body.(io.ReadWriteCloser)
			if !ok {
				resp.Body.Close()
				return nil, fmt.Errorf("schedd switched protocols but the stream is not writable")
			}
			return rwc, nil
		case http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
			loc, err := resp.Location()
			resp.Body.Close()
			if err != nil {
				return nil, fmt.Errorf("schedd redirected without a usable Location: %v", err)
			}
			u = loc.String()
		default:
			return nil, apiError(resp)
		}
	}
	return nil, fmt.Errorf("schedd redirected %s too many times", target)
}
