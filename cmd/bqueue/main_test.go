package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

func runBqueue(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// queueSchedd answers the queue in job id order, as schedd does.
func queueSchedd(t *testing.T) *clitest.Schedd {
	s := clitest.NewSchedd(t)
	s.Handle("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 50, api.JobList{Jobs: cli.SortJobs(clitest.Jobs()), Index: 50})
	})
	return s
}

// ids reads the JOBID column of a table.
func ids(table string) []string {
	var out []string
	for i, l := range strings.Split(strings.TrimSpace(table), "\n") {
		if i > 0 {
			out = append(out, strings.Fields(l)[0])
		}
	}
	return out
}

func TestFilters(t *testing.T) {
	s := queueSchedd(t)
	tests := []struct {
		args []string
		want []string
	}{
		{nil, []string{"12", "15", "16"}},
		{[]string{"-a"}, []string{"12", "15", "16", "3", "7", "9"}}, // started, pending by priority, held, ended
		{[]string{"-u", "alice"}, []string{"12"}},
		{[]string{"-a", "-u", "alice"}, []string{"12", "3", "9"}},
		{[]string{"-u", "all"}, []string{"12", "15", "16"}},
		{[]string{"-u", "nobody"}, nil},
	}
	for _, tt := range tests {
		code, out, errs := runBqueue(append([]string{"--addr", s.Addr}, tt.args...)...)
		if code != 0 || errs != "" {
			t.Fatalf("%q: exit %d, stderr %q", tt.args, code, errs)
		}
		if !strings.HasPrefix(out, "JOBID  POS  USER") {
			t.Errorf("%q: no header:\n%s", tt.args, out)
		}
		if got := ids(out); !slices.Equal(got, tt.want) {
			t.Errorf("%q: jobs %q, want %q", tt.args, got, tt.want)
		}
	}
}

func TestJSON(t *testing.T) {
	s := queueSchedd(t)
	code, out, errs := runBqueue("--addr", s.Addr, "-o", "json", "-u", "alice")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	var jobs []api.Job
	if err := json.Unmarshal([]byte(out), &jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].ID != 12 || len(jobs[0].Containers) != 4 {
		t.Errorf("jobs %+v", jobs)
	}
	code, out, _ = runBqueue("--addr", s.Addr, "-o", "json", "-u", "nobody")
	if code != 0 || out != "[]\n" {
		t.Errorf("empty: exit %d, %q", code, out)
	}
}

// Watch redraws once per change of index and stops with schedd's error.
func TestWatch(t *testing.T) {
	s := clitest.NewSchedd(t)
	var n atomic.Int64
	s.Handle("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		jobs := clitest.Jobs()
		switch n.Add(1) {
		case 1:
			clitest.JSON(w, http.StatusOK, 50, api.JobList{Jobs: jobs[:1], Index: 50})
		case 2: // wait timed out: same index, no redraw off a terminal
			clitest.JSON(w, http.StatusOK, 50, api.JobList{Jobs: jobs[:1], Index: 50})
		case 3:
			clitest.JSON(w, http.StatusOK, 51, api.JobList{Jobs: jobs[:2], Index: 51})
		default:
			clitest.Error(w, http.StatusServiceUnavailable, "schedd is shutting down")
		}
	})
	code, out, errs := runBqueue("--addr", s.Addr, "--watch")
	if code != 1 || errs != "bqueue: schedd is shutting down\n" {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if got := strings.Count(out, "JOBID"); got != 2 {
		t.Errorf("%d renderings, want 2:\n%s", got, out)
	}
	want := []string{"GET /v1/jobs?ended=false", "GET /v1/jobs?ended=false&index=50&wait=30s", "GET /v1/jobs?ended=false&index=50&wait=30s", "GET /v1/jobs?ended=false&index=51&wait=30s"}
	if got := s.Requests(); !slices.Equal(got, want) {
		t.Errorf("requests %q, want %q", got, want)
	}
}

func TestUnreachable(t *testing.T) {
	addr := clitest.Unreachable(t)
	for _, args := range [][]string{{"--addr", addr}, {"--watch", "--addr", addr}} {
		code, out, errs := runBqueue(args...)
		want := "bqueue: cannot reach schedd at " + addr + ": connect: no such file or directory\n"
		if code != 1 || out != "" || errs != want {
			t.Errorf("%q: exit %d, stdout %q, stderr %q, want %q", args, code, out, errs, want)
		}
	}
}

func TestAddrFromEnv(t *testing.T) {
	addr := clitest.Unreachable(t)
	t.Setenv("TROUPE_ADDR", addr)
	code, _, errs := runBqueue()
	if code != 1 || !strings.Contains(errs, addr) {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

func TestArgs(t *testing.T) {
	tests := []struct {
		args []string
		errs string
	}{
		{[]string{"12"}, `bqueue: unexpected argument "12"`},
		{[]string{"-o", "yaml"}, `bqueue: invalid value "yaml" for flag -o: want table, json or wide`},
		{[]string{"-u"}, "bqueue: flag needs an argument: -u"},
		{[]string{"--nope"}, "bqueue: flag provided but not defined: -nope"},
	}
	for _, tt := range tests {
		code, out, errs := runBqueue(tt.args...)
		if code != 2 || out != "" || errs != tt.errs+"\nRun 'bqueue -h' for usage.\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", tt.args, code, out, errs)
		}
	}
}

func TestHelp(t *testing.T) {
	code, out, errs := runBqueue("-h")
	if code != 0 || errs != "" || !strings.Contains(out, "Usage: bqueue [flags]") || !strings.Contains(out, "--watch, -w") || !strings.Contains(out, "Examples:") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
}

// bqueue -a -o json prints what the golden file holds.
func TestJSONGolden(t *testing.T) {
	s := queueSchedd(t)
	_, out, _ := runBqueue("--addr", s.Addr, "-a", "-o", "json")
	if want := clitest.Golden(t, "queue.json.golden"); out != want {
		t.Errorf("got\n%s\nwant testdata/cli/queue.json.golden", out)
	}
}

func TestFiltersAndColumns(t *testing.T) {
	s := clitest.NewSchedd(t)
	s.Handle("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 50, api.JobList{Jobs: clitest.Jobs(), Index: 50})
	})
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"-p", "cpu"}, []string{"16"}},
		{[]string{"-s", "PD,held"}, []string{"15", "16"}},
		{[]string{"-s", "DONE"}, []string{"3"}},
		{[]string{"-A", "vision", "-u", "alice"}, []string{"12"}},
		{[]string{"-A", "physics"}, nil},
		{[]string{"-o", "wide"}, []string{"12", "15", "16"}},
	}
	for _, tt := range tests {
		code, out, errs := runBqueue(append(tt.args, "--addr", s.Addr)...)
		if code != 0 || errs != "" {
			t.Fatalf("%q: exit %d, stderr %q", tt.args, code, errs)
		}
		if got := ids(out); !slices.Equal(got, tt.want) {
			t.Errorf("%q: jobs %q, want %q", tt.args, got, tt.want)
		}
	}
	code, out, _ := runBqueue("-O", "jobid,stat,time_limit", "--addr", s.Addr)
	if code != 0 || !strings.HasPrefix(out, "JOBID  STATE    TIME_LIMIT\n12     RUNNING  2:00:00\n") {
		t.Errorf("-O: exit %d:\n%s", code, out)
	}
	for _, bad := range [][]string{{"-O", "jobid,colour"}, {"-s", "SLEEPY"}, {"-o", "xml"}, {"-O", "jobid", "--start"}} {
		code, out, errs := runBqueue(append(bad, "--addr", s.Addr)...)
		if code != 2 || out != "" || !strings.HasSuffix(errs, "Run 'bqueue -h' for usage.\n") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", bad, code, out, errs)
		}
	}
}

// TestServerQuery: bqueue asks schedd only for what it shows: its users,
// partitions and states, and no ended jobs without -a.
func TestServerQuery(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "ended=false"},
		{[]string{"-a"}, ""},
		{[]string{"-u", "all"}, "ended=false"},
		{[]string{"-u", "bob", "-p", "gpu,cpu"}, "ended=false&partition=gpu&partition=cpu&user=bob"},
		{[]string{"-s", "PEND,DONE"}, "ended=false&state=PENDING&state=COMPLETED"},
		// A suspended job is RUNNING to schedd; bqueue keeps the frozen ones.
		{[]string{"-s", "S,R"}, "ended=false&state=RUNNING"},
		{[]string{"-A", "phys"}, "ended=false"}, // accounts: matched by bqueue
	} {
		s := queueSchedd(t)
		if code, _, errs := runBqueue(append(tt.args, "--addr", s.Addr)...); code != 0 {
			t.Fatalf("%q: exit %d: %s", tt.args, code, errs)
		}
		want := "GET /v1/jobs"
		if tt.want != "" {
			want += "?" + tt.want
		}
		if got := s.Requests(); len(got) != 1 || got[0] != want {
			t.Errorf("%q: requests %q, want %q", tt.args, got, want)
		}
	}
}

// signalWriter is a stdout that closes seen once what was written holds
// want.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}

// TestJSONStreams: bqueue -o json prints each job as it comes off
// schedd's answer. schedd sends the first job and holds the rest back
// until bqueue has printed it: a bqueue that read the whole answer
// first would print nothing until schedd gave up waiting.
func TestJSONStreams(t *testing.T) {
	jobs := cli.SortJobs(clitest.Jobs())
	out := &signalWriter{want: `"id": ` + strconv.FormatUint(jobs[0].ID, 10) + ",", seen: make(chan struct{})}
	var printedFirst atomic.Bool
	s := clitest.NewSchedd(t)
	s.Handle("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(api.IndexHeader, "50")
		first, _ := json.Marshal(jobs[0])
		fmt.Fprintf(w, `{"jobs":[%s`, first)
		w.(http.Flusher).Flush()
		select {
		case <-out.seen:
			printedFirst.Store(true)
		case <-time.After(10 * time.Second):
		}
		for _, j := range jobs[1:] {
			b, _ := json.Marshal(j)
			fmt.Fprintf(w, ",%s", b)
		}
		fmt.Fprint(w, `],"index":50}`+"\n")
	})
	var errb bytes.Buffer
	code := run([]string{"--addr", s.Addr, "-a", "-o", "json"}, strings.NewReader(""), out, &errb)
	if code != 0 {
		t.Fatalf("bqueue: %d %s", code, errb.String())
	}
	if !printedFirst.Load() {
		t.Fatal("bqueue -o json printed nothing before schedd's answer was whole")
	}
	if want := clitest.Golden(t, "queue.json.golden"); out.buf.String() != want {
		t.Errorf("got\n%s\nwant testdata/cli/queue.json.golden", out.buf.String())
	}
}
