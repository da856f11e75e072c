package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

func runBacct(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

var fixture = api.Accounting{GroupBy: "user", Rows: []api.AccountingRow{
	{Group: "alice", Jobs: 4, Completed: 3, Failed: 1, Wait: 4 * time.Minute, Run: 4 * time.Hour, CPUTime: 10 * time.Hour, GPUHours: 8},
	{Group: "bob", Jobs: 1, Completed: 1, Wait: 30 * time.Second, Run: time.Minute, CPUTime: 30 * time.Second},
}, Total: api.AccountingRow{Jobs: 5, Completed: 4, Failed: 1, Wait: 4*time.Minute + 30*time.Second, Run: 4*time.Hour + time.Minute,
	CPUTime: 10*time.Hour + 30*time.Second, GPUHours: 8}}

func acctSchedd(t *testing.T) (*clitest.Schedd, *[]url.Values) {
	s := clitest.NewSchedd(t)
	var qs []url.Values
	s.Handle("GET /v1/accounting", func(w http.ResponseWriter, r *http.Request) {
		qs = append(qs, r.URL.Query())
		clitest.JSON(w, http.StatusOK, 0, fixture)
	})
	return s, &qs
}

func TestQueries(t *testing.T) {
	me := cli.CurrentUser()
	for _, tt := range []struct {
		args []string
		want url.Values
	}{
		{nil, url.Values{"group": {"user"}, "user": {me}}},
		{[]string{"-u", "all", "-g", "account"}, url.Values{"group": {"account"}}},
		{[]string{"-u", "bob", "-g", "partition", "-p", "gpu", "-A", "phys", "-s", "failed"}, url.Values{"group": {"partition"},
			"user": {"bob"}, "partition": {"gpu"}, "account": {"phys"}, "state": {"FAILED"}}},
		{[]string{"-u", "all", "--since", "2026-11-01T00:00:00Z", "--until", "2026-12-01T00:00:00Z"}, url.Values{"group": {"user"},
			"ended_from": {"2026-11-01T00:00:00Z"}, "ended_to": {"2026-12-01T00:00:00Z"}}},
	} {
		s, qs := acctSchedd(t)
		code, _, errs := runBacct(append(tt.args, "--addr", s.Addr)...)
		if code != 0 || len(*qs) != 1 || (*qs)[0].Encode() != tt.want.Encode() {
			t.Errorf("%q: exit %d, stderr %q, queries %v, want %v", tt.args, code, errs, *qs, tt.want)
		}
	}
}

func TestOutput(t *testing.T) {
	s, _ := acctSchedd(t)
	code, out, errs := runBacct("-u", "all", "--addr", s.Addr)
	want := "USER   JOBS  DONE  FAILED  AVG_WAIT  AVG_RUN  RUN_TIME  CPU_TIME  GPU_HOURS\n" +
		"alice  4     3     1       1:00      1:00:00  4:00:00   10:00:00  8.00\n" +
		"bob    1     1     0       0:30      1:00     1:00      30.00s    0.00\n" +
		"TOTAL  5     4     1       0:54      48:12    4:01:00   10:00:30  8.00\n"
	if code != 0 || errs != "" || out != want {
		t.Errorf("table: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, errs, out, want)
	}
	code, out, _ = runBacct("-u", "all", "-o", "json", "--addr", s.Addr)
	var got api.Accounting
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.Total.Jobs != 5 || len(got.Rows) != 2 {
		t.Errorf("json: exit %d, %v, %+v", code, err, got)
	}
}

func TestArgs(t *testing.T) {
	s, qs := acctSchedd(t)
	for _, tt := range []struct {
		args []string
		errs string
	}{
		{[]string{"-g", "node"}, "bacct: -g node: want user, account or partition"},
		{[]string{"7"}, `bacct: unexpected argument "7": bacct takes flags only`},
		{[]string{"-s", "PENDING"}, "bacct: -s PENDING: want COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, PREEMPTED or REQUEUED"},
		{[]string{"--since", "soon"}, `bacct: --since soon: "soon" is not a time: use 2026-11-22, 2026-11-22T15:04, 2026/11/22/15:04, RFC 3339 or a duration ago such as 2h`},
	} {
		code, out, errs := runBacct(append(tt.args, "--addr", s.Addr)...)
		if code != 2 || out != "" || errs != tt.errs+"\nRun 'bacct -h' for usage.\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", tt.args, code, out, errs)
		}
	}
	if len(*qs) != 0 {
		t.Errorf("bad arguments reached schedd: %v", *qs)
	}
}
