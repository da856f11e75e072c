package httpapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"strconv"

	"github.com/troupe-hpc/troupe/internal/api"
)

func (a *API) submit(w http.ResponseWriter, r *http.Request) {
	var req api.SubmitRequest
	if !decode(w, r, &req) {
		return
	}
	asCaller(r.Context(), &req)
	res, err := a.c.Submit(r.Context(), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, res.Index, res)
}

// submitBatch stores several jobs in one raft entry (bsub --count,
// bsub a.hcl b.hcl): all of them, or none and why.
func (a *API) submitBatch(w http.ResponseWriter, r *http.Request) {
	var req api.SubmitBatch
	if !decode(w, r, &req) {
		return
	}
	for i := range req.Jobs {
		asCaller(r.Context(), &req.Jobs[i])
	}
	res, err := a.c.SubmitBatch(r.Context(), req.Jobs)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, res[0].Index, api.SubmitBatchResponse{Jobs: res})
}

// check answers bsub --dry-run: submit's admission (validation,
// partition and user limits, queue caps, whether any nodes could ever
// hold it; the same sched/admission call as POST /v1/jobs), with
// nothing stored, and notes on what may keep the job pending. A path of
// its own, not a flag on POST /v1/jobs, so that an older schedd answers
// 404/405 rather than submit the job.
func (a *API) check(w http.ResponseWriter, r *http.Request) {
	var req api.SubmitRequest
	if !decode(w, r, &req) {
		return
	}
	asCaller(r.Context(), &req)
	res, err := a.c.Check(r.Context(), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, 0, res)
}

func (a *API) jobs(w http.ResponseWriter, r *http.Request) {
	q, err := parseJobsQuery(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	wait, err := parseWait(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	idx, jobs := a.c.ListJobs(r.Context(), wait, q)
	// The api.JobList is written a job at a time: a backlog of 100,000
	// jobs (bqueue -u all) held as one list and one encoded buffer took
	// hundreds of MB of schedd's memory for each such answer.
	w.Header().Set("Content-Type", "application/json")
	if idx > 0 {
		w.Header().Set(api.IndexHeader, strconv.FormatUint(idx, 10))
	}
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	_, _ = bw.WriteString(`{"jobs":[`)
	n := 0
	for j := range jobs {
		b, err := json.Marshal(visible(r.Context(), j))
		if err != nil {
			a.log.Error("encoding a job for GET /v1/jobs", "job", j.ID, "err", err)
			return // the answer ends short: the client sees it is not JSON
		}
		if n > 0 {
			_ = bw.WriteByte(',')
		}
		_, _ = bw.Write(b)
		n++
	}
	_, _ = fmt.Fprintf(bw, "],\"index\":%d}\n", idx)
	_ = bw.Flush()
}

func (a *API) job(w http.ResponseWriter, r *http.Request) {
	ref, err := jobRef(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	wait, err := parseWait(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	j, idx, err := a.c.Job(r.Context(), wait, ref)
	if err != nil {
		// A 404 says at which index the job was missing: a client that
		// wrote it later asks again rather than believe it (the
		// read-your-writes of docs/client-guarantees.md).
		if idx > 0 {
			w.Header().Set(api.IndexHeader, strconv.FormatUint(idx, 10))
		}
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, idx, visible(r.Context(), j))
}

func (a *API) kill(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("done") == "true" { // bkill -d
		control(KillDone)(a, w, r)
		return
	}
	control(Kill)(a, w, r)
}

// control serves POST /v1/jobs/{id}/kill, hold and release: the answer
// is the job. {id} may name a whole job array ("12") or one element
// ("12[5]").
func control(op Op) func(*API, http.ResponseWriter, *http.Request) {
	return func(a *API, w http.ResponseWriter, r *http.Request) {
		ref, err := jobRef(r)
		if err != nil {
			writeErr(w, err)
			return
		}
		j, idx, err := a.c.Control(r.Context(), op, ref)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, idx, j)
	}
}

func (a *API) signal(w http.ResponseWriter, r *http.Request) {
	ref, err := jobRef(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	var req api.SignalJob
	if !decode(w, r, &req) {
		return
	}
	j, idx, err := a.c.SignalJob(r.Context(), ref, req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, idx, j)
}

// history answers bhist from the accounting store and the ended jobs
// still in the replicated state, each run once. The api.History is
// written a record at a time as the controller reads them, never held:
// an error before the first record is the answer's status, one after it
// ends the answer short (the client sees it is not JSON).
func (a *API) history(w http.ResponseWriter, r *http.Request) {
	q, err := parseHistoryQuery(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	wait, err := parseWait(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	idx, recs := a.c.JobHistory(r.Context(), wait, q)
	next, stop := iter.Pull2(recs)
	defer stop()
	h, err, more := next()
	if more && err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if idx > 0 {
		w.Header().Set(api.IndexHeader, strconv.FormatUint(idx, 10))
	}
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	_, _ = bw.WriteString(`{"jobs":[`)
	for n := 0; more; n++ {
		if err != nil {
			a.log.Error("reading the history for GET /v1/history", "err", err)
			_ = bw.Flush()
			return
		}
		b, merr := json.Marshal(visibleHistory(r.Context(), h))
		if merr != nil {
			a.log.Error("encoding a record for GET /v1/history", "job", h.ID, "err", merr)
			_ = bw.Flush()
			return
		}
		if n > 0 {
			_ = bw.WriteByte(',')
		}
		_, _ = bw.Write(b)
		h, err, more = next()
	}
	_, _ = fmt.Fprintf(bw, "],\"index\":%d}\n", idx)
	_ = bw.Flush()
}

// accounting answers bacct: the ended jobs the query picks (store and
// state, each run once) summed per ?group=user|account|partition.
func (a *API) accounting(w http.ResponseWriter, r *http.Request) {
	q, err := parseHistoryQuery(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	group := r.URL.Query().Get("group")
	if group == "" {
		group = "user"
	}
	res, err := a.c.AccountingSummary(r.Context(), q, group)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, 0, res)
}

func (a *API) partitions(w http.ResponseWriter, r *http.Request) {
	wait, err := parseWait(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	list := a.c.ListPartitions(r.Context(), wait)
	writeJSON(w, http.StatusOK, list.Index, list)
}

func (a *API) fairShare(w http.ResponseWriter, r *http.Request) {
	wait, err := parseWait(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	list := a.c.ListFairShare(r.Context(), wait)
	writeJSON(w, http.StatusOK, list.Index, list)
}
