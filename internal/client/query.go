package client

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// JobsWhere lists the jobs GET /v1/jobs's filters in q pick (user,
// partition, state, ended, after, limit: see sched/httpapi's JobsQuery); index
// and wait block as Jobs does.
func (c *Client) JobsWhere(ctx context.Context, q url.Values, index uint64, wait time.Duration) (api.JobList, error) {
	all := url.Values{}
	maps.Copy(all, q)
	maps.Copy(all, blocking(index, wait))
	var r api.JobList
	idx, err := c.Do(ctx, http.MethodGet, "/v1/jobs", all, nil, &r)
	if r.Index == 0 {
		r.Index = idx
	}
	return r, err
}
