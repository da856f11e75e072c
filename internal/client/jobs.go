package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
)

// jobCalls are the calls about jobs: submit, query, control, history.
type jobCalls struct{ *conn }

// Submit sends a job.
func (c *jobCalls) Submit(ctx context.Context, req api.SubmitRequest) (api.SubmitResponse, error) {
	var r api.SubmitResponse
	if req.RequestID == "" {
		req.RequestID = auth.NewID() + auth.NewID() // retries (across peers too) make one job
	}
	b, err := json.Marshal(req)
	if err != nil {
		return r, err
	}
	resp, err := c.roundTrip(ctx, call{method: http.MethodPost, target: "/v1/jobs", body: b, ctype: "application/json", requestID: req.RequestID})
	if err != nil {
		return r, err
	}
	defer drainClose(resp)
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return r, fmt.Errorf("decoding answer of POST /v1/jobs: %w", err)
	}
	r.Index, _ = strconv.ParseUint(resp.Header.Get(api.IndexHeader), 10, 64)
	return r, nil
}

// SubmitBatch submits several jobs in one request and one raft entry
// (POST /v1/jobs/batch, at most api.MaxSubmitBatch): all of them, in
// order, or none. The retries of the request make the same jobs: each job
// without a request id is given one. A schedd without batches answers
// 404 or 405 (IsUnsupported).
func (c *jobCalls) SubmitBatch(ctx context.Context, reqs []api.SubmitRequest) ([]api.SubmitResponse, error) {
	base := auth.NewID() + auth.NewID()
	batch := api.SubmitBatch{Jobs: make([]api.SubmitRequest, len(reqs))}
	for i, req := range reqs {
		if req.RequestID == "" {
			req.RequestID = base + "/" + strconv.Itoa(i+1)
		}
		batch.Jobs[i] = req
	}
	b, err := json.Marshal(batch)
	if err != nil {
		return nil, err
	}
	resp, err := c.roundTrip(ctx, call{method: http.MethodPost, target: "/v1/jobs/batch", body: b, ctype: "application/json", requestID: base})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r api.SubmitBatchResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("decoding answer of POST /v1/jobs/batch: %w", err)
	}
	if len(r.Jobs) != len(reqs) {
		return nil, fmt.Errorf("POST /v1/jobs/batch: %d jobs sent, %d answered", len(reqs), len(r.Jobs))
	}
	idx, _ := strconv.ParseUint(resp.Header.Get(api.IndexHeader), 10, 64)
	for i := range r.Jobs {
		r.Jobs[i].Index = idx
	}
	return r.Jobs, nil
}

// IsUnsupported reports whether err is a schedd's answer to a route it
// does not have (an older schedd): 405, or net/http's own 404.
func IsUnsupported(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && (ae.Status == http.StatusMethodNotAllowed ||
		ae.Status == http.StatusNotFound && strings.HasPrefix(ae.Message, "404 page not found"))
}

// CheckSubmit runs submit's admission checks on req without storing a
// job (bsub --dry-run): nil and where it would go, or schedd's refusal
// (an *APIError) in the words submit would use. A schedd without the
// check answers 404 or 405.
func (c *jobCalls) CheckSubmit(ctx context.Context, req api.SubmitRequest) (api.SubmitCheck, error) {
	var r api.SubmitCheck
	_, err := c.Do(ctx, http.MethodPost, "/v1/jobs/check", nil, req, &r)
	return r, err
}

// Jobs lists jobs. With index > 0 it blocks until the state moves past
// index or wait elapses.
func (c *jobCalls) Jobs(ctx context.Context, index uint64, wait time.Duration) (api.JobList, error) {
	var r api.JobList
	idx, err := c.Do(ctx, http.MethodGet, "/v1/jobs", blocking(index, wait), nil, &r)
	if r.Index == 0 {
		r.Index = idx
	}
	return r, err
}

// Job fetches one job. With index > 0 it blocks as Jobs does.
func (c *jobCalls) Job(ctx context.Context, id uint64, index uint64, wait time.Duration) (api.Job, uint64, error) {
	var r api.Job
	idx, err := c.Do(ctx, http.MethodGet, "/v1/jobs/"+strconv.FormatUint(id, 10), blocking(index, wait), nil, &r)
	return r, idx, err
}

// jobPath is the API path of the job (or array element) ref names.
func jobPath(ref api.JobRef) string { return "/v1/jobs/" + url.PathEscape(ref.String()) }

// JobRef returns the job, or the array element ("12[5]"), ref names; a
// blocking query as Job.
func (c *jobCalls) JobRef(ctx context.Context, ref api.JobRef, index uint64, wait time.Duration) (api.Job, uint64, error) {
	var r api.Job
	idx, err := c.Do(ctx, http.MethodGet, jobPath(ref), blocking(index, wait), nil, &r)
	return r, idx, err
}

// Control applies action ("kill", "hold" or "release") to the job,
// whole job array or array element ref names; q carries the action's
// options (kill's done=true).
func (c *jobCalls) Control(ctx context.Context, ref api.JobRef, action string, q url.Values) (api.Job, error) {
	var r api.Job
	_, err := c.Do(ctx, http.MethodPost, jobPath(ref)+"/"+action, q, struct{}{}, &r)
	return r, err
}

// ArrayElements lists the elements of job array id in index order, those
// that have not come up yet too (bqueue -A).
func (c *jobCalls) ArrayElements(ctx context.Context, id uint64) (api.JobList, error) {
	var r api.JobList
	_, err := c.Do(ctx, http.MethodGet, "/v1/jobs", url.Values{"array": {strconv.FormatUint(id, 10)}}, nil, &r)
	return r, err
}

// Kill cancels a job.
func (c *jobCalls) Kill(ctx context.Context, id uint64) (api.Job, error) {
	var r api.Job
	_, err := c.Do(ctx, http.MethodPost, "/v1/jobs/"+strconv.FormatUint(id, 10)+"/kill", nil, struct{}{}, &r)
	return r, err
}

// Hold keeps a pending job from being scheduled (bhold).
func (c *jobCalls) Hold(ctx context.Context, id uint64) (api.Job, error) {
	var r api.Job
	_, err := c.Do(ctx, http.MethodPost, "/v1/jobs/"+strconv.FormatUint(id, 10)+"/hold", nil, struct{}{}, &r)
	return r, err
}

// Release puts a held job back in the queue (brelease).
func (c *jobCalls) Release(ctx context.Context, id uint64) (api.Job, error) {
	var r api.Job
	_, err := c.Do(ctx, http.MethodPost, "/v1/jobs/"+strconv.FormatUint(id, 10)+"/release", nil, struct{}{}, &r)
	return r, err
}

// Signal asks that a job's containers get a signal (bkill -s); a job not
// started yet is cancelled by KILL, TERM or INT.
func (c *jobCalls) Signal(ctx context.Context, id uint64, req api.SignalJob) (api.Job, error) {
	return c.SignalRef(ctx, api.JobRef{ID: id}, req)
}

// SignalRef is Signal for a job or an array element ("12[5]").
func (c *jobCalls) SignalRef(ctx context.Context, ref api.JobRef, req api.SignalJob) (api.Job, error) {
	var r api.Job
	_, err := c.Do(ctx, http.MethodPost, jobPath(ref)+"/signal", nil, req, &r)
	return r, err
}

// History lists ended jobs (bhist); q holds GET /v1/history's filters.
func (c *jobCalls) History(ctx context.Context, q url.Values) (api.History, error) {
	var r api.History
	_, err := c.Do(ctx, http.MethodGet, "/v1/history", q, nil, &r)
	return r, err
}
