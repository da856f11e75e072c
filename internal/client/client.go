// Package client talks to schedd's /v1 API over a unix socket or TCP.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// EnvAddr names the environment variable that tells tools where schedd is.
const EnvAddr = "TROUPE_ADDR"

// DefaultAddr is used when neither --addr nor TROUPE_ADDR is given.
const DefaultAddr = "unix:///run/troupe/schedd.sock"

// ErrUnreachable wraps every failure to connect to schedd.
var ErrUnreachable = errors.New("cannot reach schedd")

// APIError is a non-2xx answer from schedd.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string { return e.Message }

// IsNotFound reports whether err is schedd saying 404.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// Client is safe for concurrent use.
type Client struct {
	addr string
	base string
	http *http.Client
}

// ResolveAddr picks the flag value, else $TROUPE_ADDR, else DefaultAddr.
func ResolveAddr(flag string) string {
	if flag != "" {
		return flag
	}
	if v := os.Getenv(EnvAddr); v != "" {
		return v
	}
	return DefaultAddr
}

// New returns a client for addr: "unix:///path/sock", "/path/sock",
// "http://host:port" or "host:port".
func New(addr string) (*Client, error) {
	c := &Client{addr: addr}
	tr := &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second}
	switch {
	case strings.HasPrefix(addr, "unix://") || strings.HasPrefix(addr, "/"):
		path := strings.TrimPrefix(addr, "unix://")
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		c.base = "http://schedd"
	case strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://"):
		c.base = strings.TrimRight(addr, "/")
	case addr != "":
		c.base = "http://" + addr
	default:
		return nil, fmt.Errorf("empty schedd address")
	}
	c.http = &http.Client{Transport: tr}
	return c, nil
}

// Addr is the address the client was made for.
func (c *Client) Addr() string { return c.addr }

// Do sends in (if non-nil) as JSON and decodes the answer into out (if
// non-nil). It returns the X-Troupe-Index of the answer.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, in, out any) (uint64, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return 0, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, fmt.Errorf("%w at %s: %v", ErrUnreachable, c.addr, unwrapDial(err))
	}
	defer resp.Body.Close()
	idx, _ := strconv.ParseUint(resp.Header.Get(api.IndexHeader), 10, 64)
	if resp.StatusCode/100 != 2 {
		var e api.Error
		b, _ := io.ReadAll(resp.Body)
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
		}
		return idx, &APIError{Status: resp.StatusCode, Message: e.Error}
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return idx, fmt.Errorf("decoding answer of %s %s: %w", method, path, err)
		}
	}
	return idx, nil
}

func unwrapDial(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

// Submit sends a job.
func (c *Client) Submit(ctx context.Context, req api.SubmitRequest) (api.SubmitResponse, error) {
	var r api.SubmitResponse
	_, err := c.Do(ctx, http.MethodPost, "/v1/jobs", nil, req, &r)
	return r, err
}

// Jobs lists jobs. With index > 0 it blocks until the state moves past
// index or wait elapses.
func (c *Client) Jobs(ctx context.Context, index uint64, wait time.Duration) (api.JobList, error) {
	var r api.JobList
	idx, err := c.Do(ctx, http.MethodGet, "/v1/jobs", blocking(index, wait), nil, &r)
	if r.Index == 0 {
		r.Index = idx
	}
	return r, err
}

// Job fetches one job. With index > 0 it blocks as Jobs does.
func (c *Client) Job(ctx context.Context, id uint64, index uint64, wait time.Duration) (api.Job, uint64, error) {
	var r api.Job
	idx, err := c.Do(ctx, http.MethodGet, "/v1/jobs/"+strconv.FormatUint(id, 10), blocking(index, wait), nil, &r)
	return r, idx, err
}

// Kill cancels a job.
func (c *Client) Kill(ctx context.Context, id uint64) (api.Job, error) {
	var r api.Job
	_, err := c.Do(ctx, http.MethodPost, "/v1/jobs/"+strconv.FormatUint(id, 10)+"/kill", nil, struct{}{}, &r)
	return r, err
}

// Nodes lists nodes.
func (c *Client) Nodes(ctx context.Context) (api.NodeList, error) {
	var r api.NodeList
	_, err := c.Do(ctx, http.MethodGet, "/v1/nodes", nil, nil, &r)
	return r, err
}

// Register announces a nodelet.
func (c *Client) Register(ctx context.Context, reg api.NodeRegister) (api.Node, error) {
	var r api.Node
	_, err := c.Do(ctx, http.MethodPost, "/v1/nodes/register", nil, reg, &r)
	return r, err
}

// Heartbeat tells schedd the node is alive.
func (c *Client) Heartbeat(ctx context.Context, node string) error {
	_, err := c.Do(ctx, http.MethodPost, "/v1/nodes/"+url.PathEscape(node)+"/heartbeat", nil, struct{}{}, nil)
	return err
}

// Assignments returns what node should run, blocking past index.
func (c *Client) Assignments(ctx context.Context, node string, index uint64, wait time.Duration) (api.Assignments, error) {
	var r api.Assignments
	idx, err := c.Do(ctx, http.MethodGet, "/v1/nodes/"+url.PathEscape(node)+"/assignments", blocking(index, wait), nil, &r)
	if r.Index == 0 {
		r.Index = idx
	}
	return r, err
}

// Report sends container state changes.
func (c *Client) Report(ctx context.Context, node string, rep api.ContainerReport) error {
	_, err := c.Do(ctx, http.MethodPost, "/v1/nodes/"+url.PathEscape(node)+"/status", nil, rep, nil)
	return err
}

// Partitions lists the partitions in force.
func (c *Client) Partitions(ctx context.Context) (api.PartitionList, error) {
	var r api.PartitionList
	_, err := c.Do(ctx, http.MethodGet, "/v1/partitions", nil, nil, &r)
	return r, err
}

// FairShare returns the fair-share table (sshare's).
func (c *Client) FairShare(ctx context.Context) (api.FairShareList, error) {
	var r api.FairShareList
	_, err := c.Do(ctx, http.MethodGet, "/v1/fairshare", nil, nil, &r)
	return r, err
}

// Reconfig makes schedd re-read its partitions file. A broken file is an
// *APIError whose message holds the diagnostics (file:line:col).
func (c *Client) Reconfig(ctx context.Context) (api.ReconfigResponse, error) {
	var r api.ReconfigResponse
	_, err := c.Do(ctx, http.MethodPost, "/v1/reconfig", nil, struct{}{}, &r)
	return r, err
}

func blocking(index uint64, wait time.Duration) url.Values {
	if index == 0 {
		return nil
	}
	q := url.Values{"index": {strconv.FormatUint(index, 10)}}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	return q
}

// SaveSnapshot streams schedd's state, in the snapshot file format
// (header line with a sha256 of the body, then the body), to w.
func (c *Client) SaveSnapshot(ctx context.Context, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/snapshot", nil)
	if err != nil {
		return err
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}

// RestoreSnapshot sends a snapshot file; schedd checks it whole before it
// changes anything and refuses a damaged one (an *APIError, 400).
func (c *Client) RestoreSnapshot(ctx context.Context, r io.Reader) (api.SnapshotRestored, error) {
	var out api.SnapshotRestored
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/snapshot", r)
	if err != nil {
		return out, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.send(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// send does req and turns transport failures and non-2xx answers into
// errors; on success the caller closes the body.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		if req.Context().Err() != nil {
			return nil, req.Context().Err()
		}
		return nil, fmt.Errorf("%w at %s: %v", ErrUnreachable, c.addr, unwrapDial(err))
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		var e api.Error
		b, _ := io.ReadAll(resp.Body)
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
		}
		return nil, &APIError{Status: resp.StatusCode, Message: e.Error}
	}
	return resp, nil
}
