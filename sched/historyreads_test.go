package sched

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/httpapi"
)

// endedElements submits a held job array of n elements and kills the
// elements idx by name: each ends CANCELLED with a row of its own.
func endedElements(t *testing.T, c *client.Client, n int, kill ...int) uint64 {
	t.Helper()
	ctx := context.Background()
	req := api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1)), Hold: true}
	req.Spec.Array = &api.ArraySpec{Range: "1-" + strconv.Itoa(n)}
	r, err := c.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	killElements(t, c, r.JobID, kill...)
	return r.JobID
}

func killElements(t *testing.T, c *client.Client, id uint64, idx ...int) {
	t.Helper()
	for _, i := range idx {
		if _, err := c.Control(context.Background(), api.JobRef{ID: id, Index: i, Element: true}, "kill", nil); err != nil {
			t.Fatalf("killing %d[%d]: %v", id, i, err)
		}
	}
}

// TestHistoryOfOneElement: GET /v1/history?id=A[i] (bhist -l 'A[i]',
// sacct -j A_i) answers exactly the records of element i that the whole
// array's history (id=A) filtered here holds, whether the element's run
// is in the accounting store or still in the replicated state, and
// nothing for an element that has not ended. Without the element filter
// schedd refused the id, and the tools fetched every element's record.
func TestHistoryOfOneElement(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	srv, c := exportServer(t, t.TempDir(), clock, Config{KeepEnded: 5 * time.Minute})
	ctx := context.Background()
	a := endedElements(t, c, 50, 3, 7, 20)
	other := endedElements(t, c, 10, 3)
	clock.Add(10 * time.Minute)
	if _, err := srv.ExportEnded(ctx); err != nil {
		t.Fatal(err)
	}
	killElements(t, c, a, 5, 33) // ended, still in the state
	v := srv.st.Snapshot()
	if v.Element(a, 3) != nil || v.Element(a, 5) == nil {
		t.Fatalf("want %d[3] purged to the store and %d[5] in the state", a, a)
	}
	all := history(t, c, url.Values{"id": {strconv.FormatUint(a, 10)}})
	if len(all) != 5 {
		t.Fatalf("array %d's history holds %d records, want 5 (3, 7, 20 stored; 5, 33 in the state)", a, len(all))
	}
	for _, i := range []int{3, 5, 7, 20, 33, 40} {
		ref := api.JobRef{ID: a, Index: i, Element: true}
		got := history(t, c, url.Values{"id": {ref.String()}})
		want := []api.HistoryJob{}
		for _, h := range all {
			if h.ArrayIndex == i {
				want = append(want, h)
			}
		}
		if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
			t.Errorf("history of %s:\n got %s\nwant %s", ref, g, w)
		}
		if i != 40 && len(got) != 1 {
			t.Errorf("history of %s: %d records, want 1", ref, len(got))
		}
	}
	// An element and a whole job together: either picks.
	got := history(t, c, url.Values{"id": {fmt.Sprintf("%d[7]", a), strconv.FormatUint(other, 10)}})
	var refs []string
	for _, h := range got {
		refs = append(refs, h.Ref())
	}
	slices.Sort(refs)
	want := []string{fmt.Sprintf("%d[3]", other), fmt.Sprintf("%d[7]", a)}
	slices.Sort(want)
	if !slices.Equal(refs, want) {
		t.Errorf("history of %d[7] and %d: %v, want %v", a, other, refs, want)
	}
}

// TestHistoryStreamedAsBefore: GET /v1/history written a record at a
// time is byte for byte the api.History encoded whole, every record in
// order (by end, id and run; stored and still-in-the-state runs merged,
// each run once), with a limit too (the last N).
func TestHistoryStreamedAsBefore(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	srv, c := exportServer(t, t.TempDir(), clock, Config{KeepEnded: 5 * time.Minute})
	ctx := context.Background()
	for range 3 {
		endJobs(t, c, 4)
		clock.Add(time.Minute)
	}
	clock.Add(10 * time.Minute)
	if _, err := srv.ExportEnded(ctx); err != nil { // the first 12 go to the store
		t.Fatal(err)
	}
	for range 2 {
		endJobs(t, c, 3) // 6 in the state
		clock.Add(time.Minute)
	}
	stored, err := srv.Accounting().Query(ctx, api.HistoryFilter{})
	if err != nil || len(stored) != 12 {
		t.Fatalf("store holds %d records (%v), want 12", len(stored), err)
	}
	for _, limit := range []int{0, 4, 10, 100} {
		q := api.HistoryFilter{Limit: limit}
		// The answer as it was made whole: the state's records, then the
		// store's not among them, sorted, the last limit kept.
		live := History(stateHistory(srv.st.Snapshot(), api.HistoryFilter{}), q)
		want := append([]api.HistoryJob{}, live...)
		seen := map[uint64]bool{}
		for _, h := range live {
			seen[h.ID] = true
		}
		for _, h := range stored {
			if !seen[h.ID] {
				want = append(want, h)
			}
		}
		want = sortHistory(want, limit)
		if limit == 0 && len(want) != 18 {
			t.Fatalf("%d records, want 18", len(want))
		}
		idx, _ := srv.st.Snapshot().Index()
		var buf bytes.Buffer
		if err := json.NewEncoder(&buf).Encode(api.History{Jobs: want, Index: idx}); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(c.Addr() + "/v1/history?limit=" + strconv.Itoa(limit))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Equal(body, buf.Bytes()) {
			t.Errorf("limit %d: GET /v1/history answered\n%s\nwant\n%s", limit, body, buf.Bytes())
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestListingsStreamedAsBefore: GET /v1/nodes and GET /v1/jobs, written
// an element at a time, are byte for byte their list encoded whole,
// every element in order.
func TestListingsStreamedAsBefore(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	srv, c := exportServer(t, t.TempDir(), clock, Config{KeepEnded: 5 * time.Minute})
	ctx := context.Background()
	for i := range 5 {
		register(t, c, fmt.Sprintf("n%d", i), 4)
	}
	endJobs(t, c, 3)
	endedElements(t, c, 20, 2, 4)
	get := func(path string) []byte {
		resp, err := http.Get(c.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return b
	}
	encode := func(v any) []byte {
		var buf bytes.Buffer
		if err := json.NewEncoder(&buf).Encode(v); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	nodes := srv.ListNodes(ctx, httpapi.Wait{})
	if len(nodes.Nodes) != 5 {
		t.Fatalf("%d nodes, want 5", len(nodes.Nodes))
	}
	if got, want := get("/v1/nodes"), encode(nodes); !bytes.Equal(got, want) {
		t.Errorf("GET /v1/nodes answered\n%s\nwant\n%s", got, want)
	}
	idx, jobs := srv.ListJobs(ctx, httpapi.Wait{}, httpapi.JobsQuery{})
	list := api.JobList{Jobs: slices.Collect(jobs), Index: idx}
	if len(list.Jobs) != 6 {
		t.Fatalf("%d jobs, want 6 (3 jobs, an array and 2 of its elements)", len(list.Jobs))
	}
	if got, want := get("/v1/jobs"), encode(list); !bytes.Equal(got, want) {
		t.Errorf("GET /v1/jobs answered\n%s\nwant\n%s", got, want)
	}
}
