package main

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
	"github.com/troupe-hpc/troupe/jobspec"
)

// arraySchedd serves the fixtures plus job array 40 (sbatch --array=1-4%2):
// elements 1 (id 41, running) and 2 (id 42, completed) have come up,
// 3 and 4 have no row yet. ?array=40 lists its elements, those without a
// row with id 0, as schedd does.
func arraySchedd(t *testing.T) *clitest.Schedd {
	t.Helper()
	s := clitest.NewSchedd(t)
	x, _, _ := jobspec.ParseIndices("1-4")
	base := clitest.Job(15)
	base.Containers, base.Reason = nil, ""
	parent := base
	parent.ID, parent.Name, parent.User, parent.State = 40, "sweep", "bob", api.JobRunning
	parent.Array = &api.Array{Indices: x, Count: 4, MaxRunning: 2, Next: 2,
		States: map[api.JobState]int{api.JobRunning: 1, api.JobCompleted: 1, api.JobPending: 2}}
	e1 := clitest.Job(12)
	e1.ID, e1.Name, e1.User, e1.UID, e1.GID, e1.ArrayID, e1.ArrayIndex = 41, "sweep", "bob", 1001, 54321, 40, 1
	e1.Submitted = parent.Submitted
	e2 := clitest.Job(3)
	e2.ID, e2.Name, e2.User, e2.ArrayID, e2.ArrayIndex, e2.Ended = 42, "sweep", "bob", 40, 2, time.Now()
	e2.Submitted = parent.Submitted
	unmade := func(i int) api.Job {
		u := base
		u.ID, u.Name, u.ArrayID, u.ArrayIndex, u.State = 0, "sweep", 40, i, api.JobPending
		return u
	}
	all := append(clitest.Jobs(), parent, e1, e2)
	s.Handle("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("array") == "40" {
			clitest.JSON(w, http.StatusOK, 7, api.JobList{Jobs: []api.Job{e1, e2, unmade(3), unmade(4)}, Index: 7})
			return
		}
		clitest.JSON(w, http.StatusOK, 7, api.JobList{Jobs: all, Index: 7})
	})
	s.Handle("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if ref, err := api.ParseJobRef(r.PathValue("id")); err == nil && ref.Element && ref.ID == 40 {
			for _, e := range []api.Job{e1, e2, unmade(3), unmade(4)} {
				if e.ArrayIndex == ref.Index {
					clitest.JSON(w, http.StatusOK, 7, e)
					return
				}
			}
		}
		for _, j := range all {
			if strconv.FormatUint(j.ID, 10) == r.PathValue("id") {
				clitest.JSON(w, http.StatusOK, 7, j)
				return
			}
		}
		clitest.Error(w, http.StatusNotFound, "job "+r.PathValue("id")+" not found")
	})
	s.Handle("GET /v1/jobs/{id}/elements/{index}", func(w http.ResponseWriter, r *http.Request) {
		clitest.Error(w, http.StatusNotFound, "no such element")
	})
	s.Handle("GET /v1/history", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 7, api.History{Index: 7})
	})
	s.Handle("GET /v1/partitions", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 7, clitest.Partitions())
	})
	s.Handle("GET /v1/nodes", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 7, api.NodeList{Nodes: clitest.Nodes(), Index: 7})
	})
	s.Handle("POST /v1/jobs/{id}/hold", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 8, api.Job{State: api.JobHeld})
	})
	s.Handle("POST /v1/jobs/{id}/release", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 8, api.Job{State: api.JobPending})
	})
	t.Setenv("TROUPE_ADDR", s.Addr)
	return s
}

// Slurm's forms, as its manual pages write them: a job array's elements
// are ARRAYID_INDEX in squeue's %i and sacct's JobID, the elements not
// started yet one row ARRAYID_[INDICES%MAX] ("Job arrays" in squeue(1):
// "1234_[3-4%2]"), JobIDRaw and %A each element's own id; squeue -O
// (--Format) takes TYPE[:[.][SIZE][SUFFIX]], 20 wide without a size;
// sacct takes --clusters all and -M; scontrol shows jobs, nodes and
// partitions as Key=Value records (-o: one line each).
func TestSlurmForms(t *testing.T) {
	arraySchedd(t)
	const us = "\x1f"
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"squeue", "-h", "-o", "%i %A %F %K %t", "-u", "bob", "-t", "all"}, 0,
			"15 15 15 N/A PD\n16 16 16 N/A PD\n40_[3-4%2] 40 40 3-4%2 PD\n40_1 41 40 1 R\n40_2 42 40 2 CD\n"},
		{[]string{"squeue", "-h", "-o", "%i %T", "-j", "40"}, 0, "40_[3-4%2] PENDING\n40_1 RUNNING\n40_2 COMPLETED\n"},
		{[]string{"squeue", "-h", "-o", "%i", "-j", "40_1"}, 0, "40_1\n"},
		// -r: one element a line, as batchtools lists its array's ids;
		// every state name of Slurm's is taken (those troupe never has
		// match nothing).
		{[]string{"squeue", "--user=bob", "--states=PD,CF,RF,RH,RQ,SE", "--noheader", "--format=%i", "-r"}, 0, "15\n16\n40_3\n40_4\n"},
		{[]string{"squeue", "--user=bob", "--states=R,S,CG,RS,SI,SO,ST", "--noheader", "--format=%i", "-r"}, 0, "40_1\n"},
		{[]string{"squeue", "-t", "FROB"}, 1, ""},
		{[]string{"squeue", "--noheader", "--Format=JobID,State:10,Name:.8|", "-j", "12"}, 0,
			"12                  RUNNING      train|\n"},
		{[]string{"squeue", "--all", "--states=all", "--noconvert", "-O", "JobID:" + us + ",StateCompact:" + us + ",MinMemory:" + us + ",ArrayJobID:" + us + ",ArrayTaskID:" + us + ",", "-j", "12", "-M", "troupe"}, 0,
			"JOBID" + us + "ST" + us + "MIN_MEMORY" + us + "ARRAY_JOB_ID" + us + "ARRAY_TASK_ID" + us + "\n12" + us + "R" + us + "16384M" + us + "12" + us + "N/A" + us + "\n"},
		{[]string{"squeue", "-h", "-O", "JobID:8,MinMemory:6", "-j", "12"}, 0, "12      16G   \n"},
		{[]string{"squeue", "-O", "Frob"}, 1, ""},
		{[]string{"sacct", "-X", "-P", "-n", "--clusters", "all", "--format=JobID,JobIDRaw,State", "-j", "40"}, 0,
			"40_[3-4%2]|40|PENDING\n40_1|41|RUNNING\n40_2|42|COMPLETED\n"},
		{[]string{"sacct", "-X", "--parsable2", "--clusters", "all", "--noheader", "--format=JobIdRaw,State", "-M", "troupe", "--units", "G", "-j", "41"}, 0,
			"41|RUNNING\n"},
		{[]string{"sacct", "-P", "-n", "-o", "JobId,Timelimit,ReqCPUS,ReqMem,Group", "-j", "41"}, 0, "40_1|02:00:00|16|64G|54321\n"},
		{[]string{"scontrol", "show", "job", "12345"}, 1, ""},
		{[]string{"scontrol", "frob"}, 1, ""},
		{[]string{"scontrol", "hold", "15"}, 0, ""},
		{[]string{"scontrol", "release", "15,40_3"}, 0, ""},
	} {
		code, out, errs := runCmd(t, c.args...)
		if code != c.code || out != c.out {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, %q", c.args, code, out, errs, c.code, c.out)
		}
	}
}

// scontrol show job/node/partition: Slurm's Key=Value records, the lines
// after the first indented by three spaces and records apart by a blank
// line; with -o one line each, every value present (a tool splits the
// line on spaces and each token on its first '=').
func TestScontrolShow(t *testing.T) {
	arraySchedd(t)
	code, out, errs := runCmd(t, "scontrol", "show", "job", "41")
	if code != 0 || !strings.HasPrefix(out, "JobId=41 ArrayJobId=40 ArrayTaskId=1 JobName=sweep\n   UserId=bob(1001) GroupId=54321(54321)") ||
		!strings.Contains(out, "\n   JobState=RUNNING Reason=None Dependency=(null)\n") || !strings.HasSuffix(out, "\n\n") {
		t.Errorf("show job 41: exit %d, stderr %q\n%s", code, errs, out)
	}
	code, out, _ = runCmd(t, "scontrol", "-o", "show", "job", "40")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "JobId=40 ArrayJobId=40 ArrayTaskId=3-4 ArrayTaskThrottle=2 JobName=sweep ") ||
		!strings.Contains(lines[0], " JobState=PENDING ") {
		t.Errorf("show -o job 40: exit %d\n%s", code, out)
	}
	code, out, _ = runCmd(t, "scontrol", "show", "part", "-o")
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		for _, tok := range strings.Split(line, " ") {
			if k, v, ok := strings.Cut(tok, "="); !ok || k == "" || v == "" {
				t.Errorf("show part -o: token %q of %q is not Key=Value", tok, line)
			}
		}
	}
	if code != 0 || !strings.HasPrefix(out, "PartitionName=") || !strings.Contains(out, " Default=YES ") {
		t.Errorf("show part -o: exit %d\n%s", code, out)
	}
	code, out, _ = runCmd(t, "scontrol", "show", "node", "node01")
	if code != 0 || !strings.HasPrefix(out, "NodeName=node01 Arch=") || !strings.Contains(out, "\n   State=") {
		t.Errorf("show node node01: exit %d\n%s", code, out)
	}
	for _, tt := range [][2]string{{"node", "Node"}, {"partition", "Partition"}} {
		code, out, errs := runCmd(t, "scontrol", "show", tt[0], "nowhere")
		if want := tt[1] + " nowhere not found\n"; code != 1 || out != "" || errs != want {
			t.Errorf("show %s nowhere: exit %d, stdout %q, stderr %q; want 1, %q", tt[0], code, out, errs, want)
		}
	}
	code, out, _ = runCmd(t, "scontrol", "show", "config")
	if code != 0 || !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool { return strings.HasPrefix(l, "MinJobAge ") && strings.HasSuffix(l, "= 300 sec") }) {
		t.Errorf("show config: exit %d\n%s", code, out)
	}
}
