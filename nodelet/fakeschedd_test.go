package nodelet

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// fakeSchedd serves the four endpoints a nodelet uses, with blocking
// assignment queries, and records every report.
type fakeSchedd struct {
	srv *httptest.Server

	mu         sync.Mutex
	changed    chan struct{} // closed and replaced on every change
	index      uint64
	assign     []api.Assignment
	updates    []api.ContainerUpdate
	registered int
	failStatus int // answer 500 to this many status posts first
}

func newFakeSchedd(t *testing.T) *fakeSchedd {
	f := &fakeSchedd{changed: make(chan struct{}), index: 1}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/nodes/register", func(w http.ResponseWriter, r *http.Request) {
		var reg api.NodeRegister
		_ = json.NewDecoder(r.Body).Decode(&reg)
		f.mu.Lock()
		f.registered++
		f.mu.Unlock()
		writeJSON(w, api.Node{Name: reg.Name, Addr: reg.Addr, State: api.NodeUp})
	})
	mux.HandleFunc("POST /v1/nodes/{name}/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, struct{}{})
	})
	mux.HandleFunc("GET /v1/nodes/{name}/assignments", f.assignments)
	mux.HandleFunc("POST /v1/nodes/{name}/status", f.status)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeSchedd) assignments(w http.ResponseWriter, r *http.Request) {
	idx, _ := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
	wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
	f.mu.Lock()
	if idx > 0 && f.index <= idx {
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(wait):
		case <-r.Context().Done():
			return
		}
		f.mu.Lock()
	}
	as := api.Assignments{Assignments: f.assign, Index: f.index}
	f.mu.Unlock()
	w.Header().Set(api.IndexHeader, strconv.FormatUint(as.Index, 10))
	writeJSON(w, as)
}

func (f *fakeSchedd) status(w http.ResponseWriter, r *http.Request) {
	var rep api.ContainerReport
	if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failStatus > 0 {
		f.failStatus--
		w.WriteHeader(http.StatusInternalServerError)
		writeJSON(w, api.Error{Error: "raft: not leader"})
		return
	}
	f.updates = append(f.updates, rep.Updates...)
	f.bumpLocked()
	writeJSON(w, struct{}{})
}

func (f *fakeSchedd) bumpLocked() {
	f.index++
	close(f.changed)
	f.changed = make(chan struct{})
}

// set replaces the assignments, as schedd's state would change.
func (f *fakeSchedd) set(as ...api.Assignment) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.assign = as
	f.bumpLocked()
}

// states returns the states reported for (job, host), in order.
func (f *fakeSchedd) states(job uint64, host string) []api.ContainerUpdate {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []api.ContainerUpdate
	for _, u := range f.updates {
		if u.JobID == job && u.Host == host {
			out = append(out, u)
		}
	}
	return out
}

// waitState waits for state to be reported for (job, host).
func (f *fakeSchedd) waitState(t *testing.T, job uint64, host string, state api.ContainerState) api.ContainerUpdate {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, u := range f.states(job, host) {
			if u.State == state {
				return u
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("job %d %s never reported %s; got %+v", job, host, state, f.states(job, host))
	return api.ContainerUpdate{}
}
