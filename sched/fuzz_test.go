package sched

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/admission"
)

// fuzzServer is a real controller (raft on disk) with one node, shared by
// a fuzz target's inputs.
func fuzzServer(f *testing.F) *Server {
	f.Helper()
	srv, err := Open(context.Background(), Config{DataDir: f.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	body := `{"name":"n1","addr":"127.0.0.1","capacity":{"cpu_milli":4000,"memory":17179869184},"runtime":"process"}`
	if code, msg := fuzzDo(srv, "POST", "/v1/nodes/register", []byte(body)); code != http.StatusOK {
		f.Fatalf("register: %d %s", code, msg)
	}
	return srv
}

func fuzzDo(srv *Server, method, path string, body []byte) (int, string) {
	r := httptest.NewRequest(method, path, bytes.NewReader(body))
	w := httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// fuzzBody sends body to path and checks the contract for hostile input:
// no panic (the fuzzer reports one), no 5xx, a rejection is a 4xx with a
// clear {"error": ...} message and leaves the state as it was.
func fuzzBody(t *testing.T, srv *Server, path string, body []byte) {
	before, _ := srv.Store().Snapshot().Index()
	code, msg := fuzzDo(srv, "POST", path, body)
	if code >= 500 {
		t.Fatalf("%s: %d %s for body %q", path, code, msg, body)
	}
	if code/100 == 2 {
		return
	}
	var e struct{ Error string }
	if err := json.Unmarshal([]byte(msg), &e); err != nil || strings.TrimSpace(e.Error) == "" {
		t.Fatalf("%s: rejection %d without an error message: %q", path, code, msg)
	}
	if after, _ := srv.Store().Snapshot().Index(); after != before {
		t.Fatalf("%s: rejected (%d %s) but the state index moved %d → %d", path, code, e.Error, before, after)
	}
}

func FuzzSubmitBody(f *testing.F) {
	for _, s := range []string{
		`{"spec":{"name":"a","image":"host","command":["true"],"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1,"memory":1073741824}},"uid":1000,"gid":1000,"user":"u"}`,
		`{"spec":{"name":"a","image":"host","command":["true"],"cluster":{"size":64,"mode":"multi-node"},"resources":{"cpu":1,"memory":1}}}`,
		`{"spec":{"name":"a","cluster":{"size":-1}}}`,
		`{"spec":{"roles":[{"name":"sub","replicas":100000}]}}`,
		`{"spec":{"name":"a","image":"host","command":["true"],"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1e308,"memory":-1,"gpu":0.5}}}`,
		`{"spec":{"name":"a","partition":"nope"}}`, `{"bogus":1}`, `[]`, `null`, ``, `{`, `"x"`,
		// Values no node can run (issue 12): each must be refused.
		`{"spec":{"name":"a","image":"host","command":["true"],"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1,"memory":1073741824,"gpu":1e9}}}`,
		`{"spec":{"name":"a","image":"host","command":["true"],"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1,"memory":9223372036854775807}}}`,
		`{"spec":{"name":"a","image":"host","command":["a\u0000b"],"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1,"memory":1073741824}}}`,
		`{"spec":{"name":"a","image":"host","command":["true"],"env":{"K":"\u0000"},"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1,"memory":1073741824}}}`,
		`{"spec":{"name":"a\u0000","image":"host","command":["true"],"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1,"memory":1073741824}}}`,
		`{"spec":{"name":"a","image":"../../etc","command":["true"],"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1,"memory":1073741824}}}`,
		`{"spec":{"name":"a","image":"host","command":["true"],"workdir":"/w\u0000","cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1,"memory":1073741824}}}`,
		`{"spec":{"name":"a","image":"host","command":["true"],"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1,"memory":1073741824}},"cwd":"rel/dir"}`,
		// A job file's text, parsed by schedd.
		`{"job_file":"variable \"n\" { default = 1 }\njob \"a\" {\n image = \"host\"\n command = [\"true\"]\n cluster { size = var.n }\n}\n","vars":{"n":"2"},"source":"a.hcl","cwd":"/tmp"}`,
		`{"job_file":"job \"a\" {\n image = \"host\"\n command = \"true\"\n}\n","cwd":"/tmp"}`,
		`{"job_file":"{\"job\":{\"a\":{\"image\":\"host\",\"command\":[\"true\"]}}}","source":"a.json","cwd":"/tmp"}`,
	} {
		f.Add([]byte(s))
	}
	srv := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzBody(t, srv, "/v1/jobs", body)
		// What was taken must be runnable: every job in the queue passes
		// the checks submit makes.
		for _, j := range srv.Store().Snapshot().Jobs() {
			sv := wire.FromAPI(specView(j))
			if d := sv.Validate(); d.HasErrors() {
				t.Fatalf("job %d stored though invalid: %s", j.ID, jobspec.FormatDiagnostics(d))
			}
			if why := admission.CheckCwd(j.Cwd); why != "" {
				t.Fatalf("job %d stored with cwd %q: %s", j.ID, j.Cwd, why)
			}
		}
	})
}

func FuzzReportBody(f *testing.F) {
	for _, s := range []string{
		`{"updates":[{"job_id":1,"host":"main1","state":"running"}]}`,
		`{"updates":[{"job_id":1,"host":"main1","state":"exited","exit_code":3}]}`,
		`{"updates":[{"job_id":18446744073709551615,"host":"","state":"bogus"}]}`,
		`{"updates":[]}`, `{"updates":null}`, `{"updates":[null]}`, `{}`, `[]`, `nul`, ``,
	} {
		f.Add([]byte(s))
	}
	srv := fuzzServer(f)
	sub := `{"spec":{"name":"a","image":"host","command":["true"],"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1,"memory":1073741824}},"uid":1000,"gid":1000,"user":"u"}`
	if code, msg := fuzzDo(srv, "POST", "/v1/jobs", []byte(sub)); code != http.StatusCreated {
		f.Fatalf("submit: %d %s", code, msg)
	}
	f.Fuzz(func(t *testing.T, body []byte) { fuzzBody(t, srv, "/v1/nodes/n1/status", body) })
}

func FuzzRegisterBody(f *testing.F) {
	for _, s := range []string{
		`{"name":"n2","addr":"10.0.0.2","capacity":{"cpu_milli":8000,"memory":34359738368,"gpu":2},"runtime":"runc","labels":["gpu"]}`,
		`{"name":"","capacity":{"cpu_milli":1,"memory":1}}`,
		`{"name":"n3","capacity":{"cpu_milli":-5,"memory":1}}`,
		`{"name":"n4","capacity":{"cpu_milli":1,"memory":1,"gpu":-1}}`,
		`{"name":"n5","capacity":{"cpu_milli":1,"memory":1,"gpu":1e300}}`,
		`{"name":"../x","capacity":{"cpu_milli":1000,"memory":1}}`,
		`{"name":1}`, `{}`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	srv := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) { fuzzBody(t, srv, "/v1/nodes/register", body) })
}
