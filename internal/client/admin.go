package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// adminCalls are an administrator's: partitions, fair share, reconfig,
// snapshots, tokens, raft membership, accounting.
type adminCalls struct{ *conn }

// Partitions lists the partitions in force.
func (c *adminCalls) Partitions(ctx context.Context) (api.PartitionList, error) {
	var r api.PartitionList
	_, err := c.Do(ctx, http.MethodGet, "/v1/partitions", nil, nil, &r)
	return r, err
}

// FairShare returns the fair-share table (sshare's).
func (c *adminCalls) FairShare(ctx context.Context) (api.FairShareList, error) {
	var r api.FairShareList
	_, err := c.Do(ctx, http.MethodGet, "/v1/fairshare", nil, nil, &r)
	return r, err
}

// Reconfig makes schedd re-read its partitions file. A broken file is an
// *APIError whose message holds the diagnostics (file:line:col).
func (c *adminCalls) Reconfig(ctx context.Context) (api.ReconfigResponse, error) {
	var r api.ReconfigResponse
	_, err := c.Do(ctx, http.MethodPost, "/v1/reconfig", nil, struct{}{}, &r)
	return r, err
}

// SaveSnapshot streams schedd's state and its accounting store's rows,
// in the snapshot file format (a header line with a sha256 of the state,
// the state, then the accounting section with its own header), to w.
func (c *adminCalls) SaveSnapshot(ctx context.Context, w io.Writer) error {
	resp, err := c.roundTrip(ctx, call{method: http.MethodGet, target: "/v1/snapshot"})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}

// RestoreSnapshot sends a snapshot file; schedd checks it whole, and its
// accounting store against it, before it changes anything, and refuses a
// damaged file (an *APIError, 400) or a store that disagrees with it
// (409). allowMissingHistory restores the state although the store and
// the file lack jobs the state had handed to the store.
//
// The file is streamed from r, a buffer at a time, never held in memory
// (it holds the whole accounting history), and checked as it goes as
// schedd checks it: a section whose length or sha256 is not its
// header's cuts the upload (ErrBadSnapshotFile), so nothing is
// restored. r is read again from its start for a second try (a redirect
// to the leader) when it can seek; a stream that cannot is sent once.
func (c *adminCalls) RestoreSnapshot(ctx context.Context, r io.Reader, allowMissingHistory bool) (api.SnapshotRestored, error) {
	var out api.SnapshotRestored
	target := "/v1/snapshot"
	if allowMissingHistory {
		target += "?allow_missing_history=true"
	}
	resp, err := c.roundTrip(ctx, call{method: http.MethodPost, target: target, bodyFn: snapshotBody(r), ctype: "application/octet-stream", wait: restoreWait})
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// restoreWait is how long schedd may take to answer a restore once the
// file is sent: it checks the whole file and the accounting store
// against it, and refills the store, before it answers.
const restoreWait = 10 * time.Minute

// CreateToken asks schedd for a bearer token.
func (c *adminCalls) CreateToken(ctx context.Context, req api.TokenCreate) (api.TokenCreated, error) {
	var r api.TokenCreated
	_, err := c.Do(ctx, http.MethodPost, "/v1/tokens", nil, req, &r)
	return r, err
}

// Tokens lists the tokens the caller may see.
func (c *adminCalls) Tokens(ctx context.Context) (api.TokenList, error) {
	var r api.TokenList
	_, err := c.Do(ctx, http.MethodGet, "/v1/tokens", nil, nil, &r)
	return r, err
}

// RevokeToken revokes a token by id.
func (c *adminCalls) RevokeToken(ctx context.Context, id string) error {
	_, err := c.Do(ctx, http.MethodPost, "/v1/tokens/"+url.PathEscape(id)+"/revoke", nil, struct{}{}, nil)
	return err
}

// RaftJoin asks the leader to add a schedd peer.
func (c *adminCalls) RaftJoin(ctx context.Context, req api.RaftJoin) error {
	_, err := c.Do(ctx, http.MethodPost, "/v1/raft/join", nil, req, nil)
	return err
}
