package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// JobsWhere lists the jobs GET /v1/jobs's filters in q pick (user,
// partition, state, ended, after, limit: see sched/httpapi's JobsQuery); index
// and wait block as Jobs does.
func (c *jobCalls) JobsWhere(ctx context.Context, q url.Values, index uint64, wait time.Duration) (api.JobList, error) {
	var r api.JobList
	idx, err := c.EachJob(ctx, q, index, wait, func(j api.Job) error {
		r.Jobs = append(r.Jobs, j)
		return nil
	})
	r.Index = idx
	if err == nil && r.Jobs == nil {
		r.Jobs = []api.Job{}
	}
	return r, err
}

// EachJob reads the jobs GET /v1/jobs's filters in q pick, as JobsWhere
// does, and calls each with every job as it comes off the answer, in the
// answer's order (job id): the list is never held, so that a queue of
// 100,000 jobs (an admin's bqueue -u all -o json) costs one job's memory
// at a time. It returns the answer's index. An error from each stops
// the read and is returned as it is; each may have seen some of the
// jobs before an error in the answer.
func (c *jobCalls) EachJob(ctx context.Context, q url.Values, index uint64, wait time.Duration, each func(api.Job) error) (uint64, error) {
	return eachOf(c.conn, ctx, "/v1/jobs", "jobs", q, index, wait, each)
}

// EachHistory reads the ended jobs GET /v1/history's filters in q pick
// (bhist, sacct), calling each with every record as it comes off the
// answer, oldest end first, as EachJob does for jobs.
func (c *jobCalls) EachHistory(ctx context.Context, q url.Values, each func(api.HistoryJob) error) (uint64, error) {
	return eachOf(c.conn, ctx, "/v1/history", "jobs", q, 0, 0, each)
}

// eachOf reads GET path?q (a blocking query after index) and calls each
// with every element of the answer's list key as it comes off it.
func eachOf[T any](c *conn, ctx context.Context, path, key string, q url.Values, index uint64, wait time.Duration, each func(T) error) (uint64, error) {
	all := url.Values{}
	maps.Copy(all, q)
	maps.Copy(all, blocking(index, wait))
	target := path
	if len(all) > 0 {
		target += "?" + all.Encode()
	}
	resp, err := c.roundTrip(ctx, call{method: http.MethodGet, target: target, ctype: "application/json", wait: waitOf(all)})
	if err != nil {
		return 0, err
	}
	defer drainClose(resp)
	idx, _ := strconv.ParseUint(resp.Header.Get(api.IndexHeader), 10, 64)
	body, err := decodeList(resp.Body, key, each)
	if body != 0 {
		idx = body
	}
	var stop *stopped
	switch {
	case errors.As(err, &stop):
		return idx, stop.err
	case err != nil:
		return idx, fmt.Errorf("decoding answer of GET %s: %w", path, err)
	}
	return idx, nil
}

// stopped is an error of EachJob's caller, passed through the decoder.
type stopped struct{ err error }

func (s *stopped) Error() string { return s.err.Error() }

// decodeList reads an object off r whose member key is a list (or
// null) of T, an element at a time, calling each with every element,
// and returns its "index": api.JobList, api.History, api.NodeList.
// Members it does not know are skipped, as json.Unmarshal would.
func decodeList[T any](r io.Reader, key string, each func(T) error) (uint64, error) {
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return 0, err
	}
	var idx uint64
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return idx, err
		}
		switch tok {
		case key:
			if err := decodeElements(dec, key, each); err != nil {
				return idx, err
			}
		case "index":
			if err := dec.Decode(&idx); err != nil {
				return idx, err
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return idx, err
			}
		}
	}
	return idx, expectDelim(dec, '}')
}

// decodeElements reads the list (or null) named key at dec's position.
func decodeElements[T any](dec *json.Decoder, key string, each func(T) error) error {
	tok, err := dec.Token()
	if err != nil || tok == nil {
		return err // null: none
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("%s is %v, not a list", key, tok)
	}
	for dec.More() {
		var v T
		if err := dec.Decode(&v); err != nil {
			return err
		}
		if err := each(v); err != nil {
			return &stopped{err}
		}
	}
	return expectDelim(dec, ']')
}

// expectDelim reads the delimiter want at dec's position.
func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("want %v, found %v", want, tok)
	}
	return nil
}
