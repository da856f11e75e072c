package cli_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

// lsfJobs are the fixtures plus a stopped job (bstop), a timed-out one
// and one with a long name on one node with 8 slots.
func lsfJobs() []api.Job {
	jobs := clitest.Jobs()
	stopped := clitest.Job(12)
	stopped.ID, stopped.Name = 21, "a_rather_long_job_name"
	stopped.Containers = stopped.Containers[:1]
	stopped.Containers[0].Resources.CPU = 8
	stopped.Signals = []api.SignalRequest{
		{Seq: 1, Signal: int(syscall.SIGSTOP)}, {Seq: 2, Signal: int(syscall.SIGCONT), Host: "main1"},
	}
	timeout := clitest.Job(7)
	timeout.ID, timeout.Name, timeout.State, timeout.ExitCode, timeout.Reason = 22, "slow", api.JobTimeout, 0, "walltime 2h0m0s reached"
	timeout.Containers[0].State, timeout.Containers[0].ExitCode = api.ContainerKilled, 143 // stopped at its walltime by SIGTERM
	timeout.Containers[1].CPUTime = 3*time.Hour + 25*time.Minute + 1500*time.Millisecond
	timeout.Containers[1].MemPeak = 3 << 30
	return cli.SortQueue(append(jobs, stopped, timeout))
}

func TestLSFGolden(t *testing.T) {
	now := clitest.Now
	field := func(format string) func(*bytes.Buffer) error {
		return func(b *bytes.Buffer) error {
			fields, delim, err := cli.ParseBjobsFormat(format)
			if err != nil {
				return err
			}
			return cli.WriteBjobsFields(b, lsfJobs(), fields, delim, true, now)
		}
	}
	for _, tt := range []struct {
		name   string
		render func(*bytes.Buffer) error
	}{
		{"bjobs.golden", func(b *bytes.Buffer) error { return cli.WriteBjobs(b, lsfJobs(), cli.BjobsDefault, true, now) }},
		{"bjobs_w.golden", func(b *bytes.Buffer) error { return cli.WriteBjobs(b, lsfJobs(), cli.BjobsWide, true, now) }},
		{"bjobs_W.golden", func(b *bytes.Buffer) error { return cli.WriteBjobs(b, lsfJobs(), cli.BjobsLong, true, now) }},
		{"bjobs_noheader.golden", func(b *bytes.Buffer) error { return cli.WriteBjobs(b, lsfJobs()[:2], cli.BjobsDefault, false, now) }},
		{"bjobs_o.golden", field("jobid stat user queue job_name exec_host submit_time start_time finish_time exit_code")},
		{"bjobs_o_width.golden", field("JOBID:4 stat:-6 slots nalloc_slot cpu_used mem run_time time_left pend_reason")},
		{"bjobs_o_delim.golden", field("jobid stat exit_code exit_reason delimiter=','")},
		{"lsid.golden", func(b *bytes.Buffer) error { return cli.WriteLSID(b, "troupe", "head1") }},
		{"lsclusters.golden", func(b *bytes.Buffer) error {
			return cli.WriteLSClusters(b, "troupe", "head1", clitest.Nodes(), true)
		}},
		{"showconf_mbd.golden", func(b *bytes.Buffer) error {
			t.Setenv(cli.EnvLSFConfDir, "")
			return cli.WriteShowconfMBD(b, clitest.Partitions(), now)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tt.render(&b); err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name, b.Bytes())
		})
	}
}

func TestLSFState(t *testing.T) {
	for _, c := range []struct {
		state   api.JobState
		signals []int
		want    string
	}{
		{api.JobPending, nil, "PEND"},
		{api.JobHeld, nil, "PSUSP"},
		{api.JobScheduled, nil, "RUN"},
		{api.JobPreparing, nil, "RUN"},
		{api.JobScheduled, []int{int(syscall.SIGSTOP)}, "USUSP"},
		{api.JobPreparing, []int{int(syscall.SIGSTOP), int(syscall.SIGCONT)}, "RUN"},
		{api.JobRunning, nil, "RUN"},
		{api.JobRunning, []int{int(syscall.SIGSTOP)}, "USUSP"},
		{api.JobRunning, []int{int(syscall.SIGSTOP), int(syscall.SIGUSR1)}, "USUSP"},
		{api.JobRunning, []int{int(syscall.SIGSTOP), int(syscall.SIGCONT)}, "RUN"},
		{api.JobCompleted, nil, "DONE"},
		{api.JobFailed, nil, "EXIT"},
		{api.JobCancelled, nil, "EXIT"},
		{api.JobTimeout, nil, "EXIT"},
		{api.JobNodeFail, nil, "EXIT"},
		{"NEWSTATE", nil, "UNKWN"},
	} {
		j := api.Job{State: c.state}
		for i, s := range c.signals {
			j.Signals = append(j.Signals, api.SignalRequest{Seq: uint64(i + 1), Signal: s})
		}
		if got := cli.LSFState(j); got != c.want {
			t.Errorf("%s with signals %v: %s, want %s", c.state, c.signals, got, c.want)
		}
	}
}

func TestParseBjobsFormat(t *testing.T) {
	fields, delim, err := cli.ParseBjobsFormat("jobid:8 STAT:-5 exit_code delimiter='|'")
	if err != nil || delim != "|" || len(fields) != 3 || fields[0] != (cli.BjobsField{Name: "jobid", Width: 8}) || !fields[1].Right {
		t.Errorf("fields %+v delim %q err %v", fields, delim, err)
	}
	for _, bad := range []string{"", "jobid frob", "jobid:x", "delimiter=','"} {
		if _, _, err := cli.ParseBjobsFormat(bad); !errors.Is(err, cli.ErrBjobsFormat) {
			t.Errorf("%q: %v, want ErrBjobsFormat", bad, err)
		}
	}
}

func TestMatchName(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"*run1*", "Snakemake_rule_a___(run1)", true},
		{"train", "train", true},
		{"train", "train2", false},
		{"tr*n", "train", true},
		{"a.b", "axb", false},
		{"*", "", true},
	} {
		if got := cli.MatchName(c.pattern, c.name); got != c.want {
			t.Errorf("MatchName(%q, %q) = %v", c.pattern, c.name, got)
		}
	}
}

// TestShowconfAsSnakemakeReadsIt reads badmin showconf mbd as Snakemake's
// LSF plugin does: the heading skipped, each line split at " = ".
func TestShowconfAsSnakemakeReadsIt(t *testing.T) {
	t.Setenv(cli.EnvLSFConfDir, "/site/lsf")
	var b bytes.Buffer
	if err := cli.WriteShowconfMBD(&b, clitest.Partitions(), clitest.Now); err != nil {
		t.Fatal(err)
	}
	conf := map[string]string{}
	for i, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " = ")
		if i == 0 {
			continue
		}
		if !ok {
			t.Fatalf("line %d %q: no \" = \"", i+1, line)
		}
		conf[k] = v
	}
	for k, want := range map[string]string{"LSF_UNIT_FOR_LIMITS": "KB", "LSF_CONFDIR": "/site/lsf", "DEFAULT_QUEUE": "cpu", "RESOURCE_RESERVE_PER_TASK": "Y"} {
		if conf[k] != want {
			t.Errorf("%s = %q, want %q", k, conf[k], want)
		}
	}
	if conf["LSB_SHAREDIR"] == "" {
		t.Error("no LSB_SHAREDIR")
	}
}

func TestMasterName(t *testing.T) {
	host, _ := os.Hostname()
	for addr, want := range map[string]string{
		"unix:///run/troupe/schedd.sock": host,
		"head1:7070":                     "head1",
		"https://head2:7070,head3:7070":  "head2",
		"http://[::1]:7070":              "::1",
	} {
		if got := cli.MasterName(addr); got != want {
			t.Errorf("MasterName(%q) = %q, want %q", addr, got, want)
		}
	}
}

// A placed job stopped before it started is SUSPENDED to squeue, as a
// running one; without the STOP it is CONFIGURING.
func TestSlurmStateStopped(t *testing.T) {
	stop := []api.SignalRequest{{Seq: 1, Signal: int(syscall.SIGSTOP)}}
	for _, c := range []struct {
		j    api.Job
		want string
	}{
		{api.Job{State: api.JobScheduled}, "CONFIGURING"},
		{api.Job{State: api.JobScheduled, Signals: stop}, "SUSPENDED"},
		{api.Job{State: api.JobPreparing, Signals: stop}, "SUSPENDED"},
		{api.Job{State: api.JobRunning, Signals: stop}, "SUSPENDED"},
	} {
		if got := cli.SlurmState(c.j); got != c.want {
			t.Errorf("%s with signals %v: %s, want %s", c.j.State, c.j.Signals, got, c.want)
		}
	}
}

// bhist -l of a failed job whose message holds a container's control
// characters (escapes, a carriage return, a form feed, a byte that is
// not UTF-8): every line, the last one too, ends with its newline and
// none of them reaches the terminal.
func TestHistoryLongLines(t *testing.T) {
	j := clitest.History()[2]
	j.Reason = "exec failed\r\x1b[31mred\fpage\xff\v"
	j.Events[len(j.Events)-1].Detail = "FAILED, exit code 3: " + j.Reason
	var b bytes.Buffer
	if err := cli.WriteHistoryLong(&b, []api.HistoryJob{j}, time.UTC); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.HasSuffix(out, "red page\n") || strings.ContainsAny(out, "\r\x1b\f\v") || !utf8.ValidString(out) || strings.Count(out, "\n") != 14 {
		t.Errorf("bhist -l:\n%q", out)
	}
}
