package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/troupe-hpc/troupe/internal/api"
)

// Accounting sums ended jobs per user, account or partition (bacct); q
// holds GET /v1/accounting's group and filters.
func (c *adminCalls) Accounting(ctx context.Context, q url.Values) (api.Accounting, error) {
	var r api.Accounting
	_, err := c.Do(ctx, http.MethodGet, "/v1/accounting", q, nil, &r)
	return r, err
}
