package main

import (
	"bytes"
	"net/http"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

// fakeSchedd serves the fixtures: live jobs (one of them mine, ended
// just now), the accounting store's records, partitions and nodes.
func fakeSchedd(t *testing.T) *clitest.Schedd {
	t.Helper()
	me, _ := user.Current()
	s := clitest.NewSchedd(t)
	jobs := func() []api.Job {
		jobs := clitest.Jobs()
		mine := clitest.Job(3)
		mine.ID, mine.User, mine.Name = 30, me.Username, "snakejob_a"
		mine.Ended = time.Now().Add(-time.Minute)
		return append(jobs, mine)
	}
	s.Handle("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		var out []api.Job
		for _, j := range jobs() {
			if users := r.URL.Query()["user"]; len(users) == 0 || slices.Contains(users, j.User) {
				out = append(out, j)
			}
		}
		clitest.JSON(w, http.StatusOK, 7, api.JobList{Jobs: out, Index: 7})
	})
	s.Handle("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		for _, j := range jobs() {
			if strconv.FormatUint(j.ID, 10) == r.PathValue("id") {
				clitest.JSON(w, http.StatusOK, 7, j)
				return
			}
		}
		clitest.Error(w, http.StatusNotFound, "job "+r.PathValue("id")+" not found")
	})
	s.Handle("GET /v1/history", func(w http.ResponseWriter, r *http.Request) {
		old := clitest.History()[0]
		old.ID, old.User, old.Name, old.State, old.ExitCode = 25, me.Username, "snakejob_b", api.JobFailed, 2
		old.Ended = time.Now().Add(-2 * time.Minute)
		// Job 26: run 0 ended by a node failure on node01, run 1 done on node02.
		run0, run1 := old, old
		run0.ID, run0.Name, run0.State, run0.ExitCode, run0.Nodes = 26, "requeued", api.JobRequeued, 0, []string{"node01"}
		run1.ID, run1.Name, run1.State, run1.ExitCode, run1.Nodes, run1.Requeues = 26, "requeued", api.JobCompleted, 0, []string{"node02"}, 1
		var recs []api.HistoryJob
		for _, h := range []api.HistoryJob{old, run0, run1} {
			if ids := r.URL.Query()["id"]; len(ids) == 0 || ids[0] == strconv.FormatUint(h.ID, 10) {
				recs = append(recs, h)
			}
		}
		clitest.JSON(w, http.StatusOK, 7, api.History{Jobs: recs, Index: 7})
	})
	s.Handle("GET /v1/partitions", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 7, clitest.Partitions())
	})
	s.Handle("GET /v1/nodes", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 7, api.NodeList{Nodes: clitest.Nodes(), Index: 7})
	})
	s.Handle("POST /v1/jobs/{id}/kill", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "99" {
			clitest.Error(w, http.StatusNotFound, "job 99 not found")
			return
		}
		clitest.JSON(w, http.StatusOK, 8, api.Job{State: api.JobCancelled})
	})
	s.Handle("POST /v1/jobs/{id}/signal", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 8, api.Job{State: api.JobRunning})
	})
	t.Setenv("TROUPE_ADDR", s.Addr)
	return s
}

func runCmd(t *testing.T, argv ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := dispatch(argv, nil, &out, &errb)
	return code, out.String(), errb.String()
}

func TestQueries(t *testing.T) {
	fakeSchedd(t)
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		// squeue: everyone's pending and running jobs by default.
		{[]string{"squeue", "-h", "-o", "%i %t %j"}, 0, "12 R train\n15 PD sweep\n16 PD later\n"},
		{[]string{"squeue", "-h", "-o", "%i %T", "-t", "all", "-u", "alice"}, 0, "3 COMPLETED\n9 CANCELLED\n12 RUNNING\n"},
		{[]string{"squeue", "--noheader", "--format=%i|%P|%R", "-t", "PD,CA", "-p", "cpu"}, 0, "9|cpu|\n16|cpu|(JobHeldUser)\n"},
		{[]string{"squeue", "-h", "-o", "%i:%T", "-j", "7,12"}, 0, "7:FAILED\n12:RUNNING\n"},
		{[]string{"squeue", "-h", "-o", "%i", "--name", "sweep,later"}, 0, "15\n16\n"},
		{[]string{"squeue", "-h", "-j", "12345"}, 1, ""},
		{[]string{"squeue", "-o", "%i %Q"}, 1, ""},
		// sacct: the live job and the stored one, as snakemake asks.
		{[]string{"sacct", "-X", "-P", "-n", "--format=JobIdRaw,State", "-j", "30"}, 0, "30|COMPLETED\n"},
		{[]string{"sacct", "-P", "-n", "--format=JobIdRaw,State,ExitCode", "-j", "25"}, 0, "25|FAILED|2:0\n"},
		{[]string{"sacct", "-X", "-P", "--format=JobID,JobName,State", "--name", "snakejob_a,snakejob_b"}, 0,
			"JobID|JobName|State\n25|snakejob_b|FAILED\n30|snakejob_a|COMPLETED\n"},
		{[]string{"sacct", "-nu", "alice", "-o", "JobID,Account%8", "-S", "2000-01-01", "-s", "CD"}, 0, "3              vision \n"},
		{[]string{"sacct", "-n", "-P", "--format=jobid", "-S", "now-1hours", "-E", "now", "-s", "F"}, 0, "25\n"},
		// A requeued job: its last run, or with -D every run.
		{[]string{"sacct", "-P", "-n", "--format=JobIdRaw,State,NodeList", "-j", "26"}, 0, "26|COMPLETED|node02\n"},
		{[]string{"sacct", "-P", "-n", "-D", "--format=JobIdRaw,State,NodeList", "-j", "26"}, 0, "26|REQUEUED|node01\n26|COMPLETED|node02\n"},
		{[]string{"sacct", "-P", "-n", "--duplicates", "--format=JobIdRaw", "-j", "26", "-s", "RQ"}, 0, "26\n"},
		{[]string{"sacct", "--format=Frob"}, 1, ""},
		{[]string{"sacct", "-S", "yesterday-ish"}, 1, ""},
		// sinfo: the default partition starred, as snakemake reads it.
		{[]string{"sinfo", "-o", "%P"}, 0, "PARTITION\ncpu*\ngpu\n"},
		{[]string{"sinfo", "-h", "-o", "%P %D %t", "-p", "gpu"}, 0, "gpu 2 mix\n"},
		{[]string{"sinfo", "-h", "-N", "-o", "%N %P %t"}, 0, "node01 gpu mix\nnode02 gpu mix\nnode03 cpu* down*\n"},
		// scancel
		{[]string{"scancel", "12"}, 0, ""},
		{[]string{"scancel", "-s", "USR1", "12"}, 0, ""},
		{[]string{"scancel", "--name", "sweep", "-u", "bob"}, 0, ""},
		{[]string{"scancel", "99"}, 1, ""},
		{[]string{"scancel"}, 1, ""},
		{[]string{"scancel", "-s", "FROB", "12"}, 1, ""},
	} {
		code, out, errs := runCmd(t, c.args...)
		if code != c.code || out != c.out {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, %q", c.args, code, out, errs, c.code, c.out)
		}
		if code != 0 && !strings.Contains(errs, c.args[0]+":") {
			t.Errorf("%q: stderr %q does not name the command", c.args, errs)
		}
	}
}

func TestScancelRequests(t *testing.T) {
	s := fakeSchedd(t)
	runCmd(t, "scancel", "12", "15_3")
	runCmd(t, "scancel", "-b", "--signal=TERM", "12")
	runCmd(t, "scancel", "-t", "PD", "-u", "bob")
	runCmd(t, "scancel", "-s", "USR1", "15_3")
	var got []string
	for _, r := range s.Requests() {
		if strings.HasPrefix(r, "POST") {
			got = append(got, r)
		}
	}
	// 15_3 is element 3 of array 15 alone, as in Slurm, never the whole array.
	want := "POST /v1/jobs/12/kill POST /v1/jobs/15%5B3%5D/kill POST /v1/jobs/12/signal POST /v1/jobs/15/kill POST /v1/jobs/16/kill" +
		" POST /v1/jobs/15%5B3%5D/signal"
	if strings.Join(got, " ") != want {
		t.Errorf("requests %q\nwant %s", got, want)
	}
}

func TestSlurmTime(t *testing.T) {
	now := time.Date(2026, 11, 26, 15, 4, 5, 0, time.UTC)
	for in, want := range map[string]string{
		"now":                 "2026-11-26T15:04:05Z",
		"today":               "2026-11-26T00:00:00Z",
		"now-2hours":          "2026-11-26T13:04:05Z",
		"now-30":              "2026-11-26T15:03:35Z",
		"now-1days":           "2026-11-25T15:04:05Z",
		"09:30":               "2026-11-26T09:30:00Z",
		"11/20":               "2026-11-20T00:00:00Z",
		"11/20/25":            "2025-11-20T00:00:00Z",
		"2026-11-01":          "2026-11-01T00:00:00Z",
		"2026-11-01T08:15":    "2026-11-01T08:15:00Z",
		"2026-11-01T08:15:30": "2026-11-01T08:15:30Z",
	} {
		got, err := slurmTime(in, now)
		if err != nil || got.Format(time.RFC3339) != want {
			t.Errorf("%s: %v, %v; want %s", in, got.Format(time.RFC3339), err, want)
		}
	}
}

func TestSrunLayout(t *testing.T) {
	hosts := []string{"main1", "sub1", "sub2"}
	for _, c := range []struct {
		ntasks, nnodes, perNode int
		jobTasks                string
		want                    string
	}{
		{0, 0, 0, "6", "0.0 0.1 1.0 1.1 2.0 2.1"},
		{0, 0, 0, "", "0.0 1.0 2.0"},
		{1, 0, 0, "6", "0.0"},
		{4, 0, 0, "6", "0.0 0.1 1.0 2.0"},
		{0, 2, 0, "6", "0.0 1.0"},
		{3, 2, 0, "6", "0.0 0.1 1.0"},
		{0, 0, 2, "6", "0.0 0.1 1.0 1.1 2.0 2.1"},
		{3, 0, 2, "6", "0.0 0.1 1.0"},
		{8, 0, 0, "6", "0.0 0.1 0.2 1.0 1.1 1.2 2.0 2.1"},
	} {
		plan := layout(hosts, c.ntasks, c.nnodes, c.perNode, c.jobTasks)
		var got []string
		for _, p := range plan {
			got = append(got, strings.Join([]string{string(rune('0' + p.node)), string(rune('0' + p.local))}, "."))
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%+v: %q; want %s", c, got, c.want)
		}
	}
}

// srun in a one-container job runs its tasks here, each with its rank.
func TestSrunLocal(t *testing.T) {
	host, _ := os.Hostname()
	t.Setenv("SLURM_JOB_ID", "5")
	t.Setenv("SLURM_JOB_NODELIST", host)
	t.Setenv("SLURMD_NODENAME", host)
	t.Setenv("SLURM_NTASKS", "3")
	code, out, errs := runCmd(t, "srun", "-l", "sh", "-c", "echo $SLURM_PROCID/$SLURM_NTASKS/$SLURM_NODEID")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.Contains(out, "0: 0/3/0\n") || !strings.Contains(out, "2: 2/3/0\n") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, _, errs = runCmd(t, "srun", "-n2", "--cpu-bind=q", "sh", "-c", "exit $((SLURM_PROCID + 3))")
	if code != 4 || !strings.Contains(errs, "task 1: Exited with exit code 4") {
		t.Errorf("failing tasks: exit %d, stderr %q; want 4, the highest", code, errs)
	}
	t.Setenv("SLURM_JOB_ID", "")
	if code, _, errs := runCmd(t, "srun", "true"); code != 1 || !strings.Contains(errs, "not inside a job") {
		t.Errorf("outside a job: exit %d, %q", code, errs)
	}
}

// A poller's sacct -j asks for its job alone, not for the whole queue;
// a list is filtered by schedd.
func TestSacctAsksForItsJobs(t *testing.T) {
	s := fakeSchedd(t)
	runCmd(t, "sacct", "-P", "-n", "--format=JobIdRaw,State", "-j", "30")
	runCmd(t, "squeue", "-u", "bob")
	var gets []string
	for _, r := range s.Requests() {
		if strings.HasPrefix(r, "GET /v1/jobs") {
			gets = append(gets, r)
		}
	}
	if want := []string{"GET /v1/jobs/30", "GET /v1/jobs?user=bob"}; !slices.Equal(gets, want) {
		t.Errorf("requests %q, want %q", gets, want)
	}
}
