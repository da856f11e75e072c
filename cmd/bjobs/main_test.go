package main

import (
	"bytes"
	"net/http"
	"os/user"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

// queries are the GET /v1/jobs queries runBjobs's schedd was asked.
var queries []string

func runBjobs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	s := clitest.NewSchedd(t)
	all := func() []api.Job {
		jobs := clitest.Jobs()
		me, _ := user.Current()
		mine := clitest.Job(3)
		mine.ID, mine.User, mine.Name = 30, me.Username, "Snakemake_rule_a___(run1)"
		return append(jobs, mine)
	}
	s.Handle("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.Path)
		for _, j := range all() {
			if strconv.FormatUint(j.ID, 10) == r.PathValue("id") {
				clitest.JSON(w, http.StatusOK, 7, j)
				return
			}
		}
		clitest.Error(w, http.StatusNotFound, "job "+r.PathValue("id")+" not found")
	})
	s.Handle("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		jobs := all()
		queries = append(queries, r.URL.RawQuery)
		// As schedd filters: user, partition, ended=false.
		q := r.URL.Query()
		var out []api.Job
		for _, j := range jobs {
			if (q.Get("user") == "" || j.User == q.Get("user")) && (q.Get("partition") == "" || j.Partition == q.Get("partition")) &&
				(q.Get("ended") != "false" || !j.State.Terminal()) {
				out = append(out, j)
			}
		}
		clitest.JSON(w, http.StatusOK, 7, api.JobList{Jobs: out, Index: 7})
	})
	s.Handle("GET /v1/nodes", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 7, api.NodeList{Nodes: clitest.Nodes()})
	})
	var out, errb bytes.Buffer
	code := run(append([]string{"--addr", s.Addr}, args...), nil, &out, &errb)
	return code, out.String(), errb.String()
}

func TestSplitLetters(t *testing.T) {
	got := splitLetters([]string{"-noheader", "-aJ", "*x*", "-aw", "-o", "jobid", "-ab", "--", "-aJ"})
	want := []string{"-noheader", "-a", "-J", "*x*", "-a", "-w", "-o", "jobid", "-ab", "--", "-aJ"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestBjobs(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		code int
		out  string
		errs string
	}{
		// Snakemake's LSF plugin's query.
		{"snakemake", []string{"-noheader", "-o", "jobid stat", "-aJ", "*run1*"}, 0, "30      DONE\n", ""},
		// By default: my unfinished jobs only; 30 is done.
		{"default mine", nil, 0, "", "No unfinished job found\n"},
		{"all users unfinished", []string{"-u", "all", "-noheader", "-o", "jobid stat"}, 0,
			"12      RUN\n15      PEND\n16      PSUSP\n", ""},
		{"queue", []string{"-u", "all", "-a", "-q", "cpu", "-o", "jobid stat queue delimiter=','"}, 0,
			"JOBID,STAT,QUEUE\n16,PSUSP,cpu\n3,DONE,cpu\n9,EXIT,cpu\n30,DONE,cpu\n", ""},
		{"user", []string{"-u", "carol", "-a", "-noheader", "-o", "jobid user stat"}, 0, "7       carol   EXIT\n", ""},
		{"name glob", []string{"-u", "all", "-J", "s*p", "-noheader", "-o", "jobid"}, 0, "15\n", ""},
		{"done only", []string{"-u", "all", "-d", "-noheader", "-o", "jobid stat"}, 0,
			"3       DONE\n7       EXIT\n9       EXIT\n30      DONE\n", ""},
		{"ids any state and user", []string{"-noheader", "-o", "jobid stat", "9", "12"}, 0, "9       EXIT\n12      RUN\n", ""},
		{"missing id", []string{"-noheader", "-o", "jobid", "12", "99"}, 1, "12\n", "Job <99> is not found\n"},
		{"bad format", []string{"-o", "jobid frob"}, 2, "", "bjobs: -o: bad -o format: unknown field \"frob\""},
		{"-o and -w", []string{"-o", "jobid", "-w"}, 2, "", "bjobs: -o chooses the columns"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runBjobs(t, c.args...)
			if code != c.code || out != c.out || !strings.HasPrefix(errs, c.errs) || (c.errs == "" && errs != "") {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, out, errs, c.code, c.out, c.errs)
			}
		})
	}
}

func TestBjobsDefaultView(t *testing.T) {
	code, out, _ := runBjobs(t, "-u", "all", "12")
	want := "JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   SUBMIT_TIME\n"
	if code != 0 || !strings.HasPrefix(out, want) || !strings.Contains(out, "\n12      alice   RUN   gpu        -           8*node01    train      ") ||
		!strings.HasSuffix(out, "\n                                             8*node02\n") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// The queries of the workflow tools that drive LSF (docs/workflow-tools.md):
// Parsl's by ids, Nextflow's bjobs -w (it finds the JOBID and STAT
// columns by their headers), Open OnDemand's bjobs -u all -a -w -W
// (whose header must hold every column it expects), batchtools' -u USER
// -w -p and -r (the first number of each line after the header).
func TestWorkflowToolQueries(t *testing.T) {
	code, out, errs := runBjobs(t, "-noheader", "-o", "jobid stat", "12", "15")
	if code != 0 || out != "12      RUN\n15      PEND\n" {
		t.Errorf("Parsl: exit %d, %q, %q", code, out, errs)
	}
	code, out, _ = runBjobs(t, "-w", "-u", "all", "-q", "gpu")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	head := strings.Fields(lines[0])
	col := func(name string) int {
		for i, h := range head {
			if h == name {
				return i
			}
		}
		return -1
	}
	if code != 0 || col("JOBID") != 0 || col("STAT") < 0 || len(lines) != 3 || strings.Fields(lines[1])[col("STAT")] != "RUN" {
		t.Errorf("Nextflow: exit %d\n%s", code, out)
	}
	code, out, _ = runBjobs(t, "-u", "all", "-a", "-w", "-W")
	head = strings.Fields(strings.SplitN(out, "\n", 2)[0])
	for _, want := range []string{"JOBID", "USER", "STAT", "QUEUE", "FROM_HOST", "EXEC_HOST", "JOB_NAME", "SUBMIT_TIME",
		"PROJ_NAME", "CPU_USED", "MEM", "SWAP", "PIDS", "START_TIME", "FINISH_TIME"} {
		if code != 0 || !strings.Contains(" "+strings.Join(head, " ")+" ", " "+want+" ") {
			t.Errorf("Open OnDemand: no column %s in %q", want, head)
		}
	}
	code, out, _ = runBjobs(t, "-u", "bob", "-w", "-p")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[1], "15 ") || !strings.HasPrefix(lines[2], "16 ") {
		t.Errorf("batchtools -p: exit %d\n%s", code, out)
	}
}

// ids are the job ids of bjobs's lines after the header.
func ids(out string) []string {
	var ids []string
	for i, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); i > 0 && len(f) > 0 {
			ids = append(ids, f[0])
		}
	}
	return ids
}

// LSF's -m: Open OnDemand's adapter, given the site's cluster name, puts
// -m CLUSTER first on its bjobs lines; the cluster's name (what lsid
// prints) is the whole cluster. Host names list the jobs with a
// container on those nodes, as LSF lists the jobs dispatched to them;
// a name that is neither is refused with LSF's message.
func TestHostsOption(t *testing.T) {
	t.Setenv("TROUPE_CLUSTER", "hpc1")
	_, all, _ := runBjobs(t, "-u", "all", "-a", "-w", "-W")
	code, out, errs := runBjobs(t, "-m", "hpc1", "-u", "all", "-a", "-w", "-W")
	if head := strings.SplitN(out, "\n", 2)[0]; code != 0 || errs != "" || head != strings.SplitN(all, "\n", 2)[0] ||
		!reflect.DeepEqual(ids(out), ids(all)) || len(ids(out)) != 7 {
		t.Errorf("OnDemand's list: exit %d, stderr %q\n%s\nwant\n%s", code, errs, out, all)
	}
	_, one, _ := runBjobs(t, "-a", "-w", "-W", "12")
	code, out, errs = runBjobs(t, "-m", "hpc1", "-a", "-w", "-W", "12")
	if code != 0 || errs != "" || !reflect.DeepEqual(ids(out), []string{"12"}) || strings.SplitN(out, "\n", 2)[0] != strings.SplitN(one, "\n", 2)[0] {
		t.Errorf("OnDemand's job: exit %d, stderr %q\n%s", code, errs, out)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-u", "all", "-m", "node02"}, []string{"12"}},                         // running on node01 and node02
		{[]string{"-u", "all", "-a", "-m", "node02"}, []string{"12", "7"}},              // and the failed one that ran there
		{[]string{"-u", "all", "-a", "-m", "node01 node03"}, []string{"12", "3", "30"}}, // either node
		{[]string{"-u", "all", "-a", "-m", "node04"}, nil},                              // nothing ran there; pending jobs run nowhere
		{[]string{"-a", "-m", "node03", "12", "3"}, []string{"3"}},
		{[]string{"-u", "all", "-am", "node01 hpc1"}, []string{"12", "15", "16", "3", "7", "9", "30"}}, // the cluster among them: every job
	} {
		code, out, errs := runBjobs(t, append([]string{"-w"}, c.args...)...)
		if got := ids(out); code != 0 || !reflect.DeepEqual(got, c.want) {
			t.Errorf("bjobs %q: exit %d, jobs %q, want %q; stderr %q\n%s", c.args, code, got, c.want, errs, out)
		}
	}
	code, out, errs = runBjobs(t, "-u", "all", "-m", "node01 nodeX other")
	if want := "nodeX: Bad host name, host group name or cluster name\nother: Bad host name, host group name or cluster name\n"; code != 1 || out != "" || errs != want {
		t.Errorf("unknown hosts: exit %d, stdout %q, stderr %q, want %q", code, out, errs, want)
	}
	if code, _, errs = runBjobs(t, "-m", ""); code != 2 || !strings.Contains(errs, "-m: want host names or the cluster's name (hpc1)") {
		t.Errorf("empty -m: exit %d, stderr %q", code, errs)
	}
}

// TestBjobsAsksSchedd: bjobs's list is filtered by schedd (the user,
// by default the caller; the queue; the unfinished jobs unless -a or
// -d), not fetched whole and filtered here; each job id is asked for
// alone, whatever its state or user.
func TestBjobsAsksSchedd(t *testing.T) {
	me, _ := user.Current()
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "ended=false&user=" + me.Username},
		{[]string{"-u", "all"}, "ended=false"},
		{[]string{"-u", "carol", "-a"}, "user=carol"},
		{[]string{"-u", "all", "-d", "-q", "cpu"}, "partition=cpu"},
		{[]string{"-u", "all", "-r"}, "ended=false"},
		{[]string{"12"}, "/v1/jobs/12"},
	} {
		queries = nil
		runBjobs(t, c.args...)
		if len(queries) != 1 || queries[0] != c.want {
			t.Errorf("bjobs %q asked schedd %q, want %q", c.args, queries, c.want)
		}
	}
}
