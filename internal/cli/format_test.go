package cli_test

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

func TestElapsed(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0:00"},
		{0, "0:00"},
		{5*time.Second + 900*time.Millisecond, "0:05"},
		{12*time.Minute + 34*time.Second, "12:34"},
		{time.Hour + 2*time.Minute + 3*time.Second, "1:02:03"},
		{23*time.Hour + 59*time.Minute + 59*time.Second, "23:59:59"},
		{2*24*time.Hour + 3*time.Hour + 4*time.Minute + 5*time.Second, "2-03:04:05"},
	}
	for _, tt := range tests {
		if got := cli.Elapsed(tt.d); got != tt.want {
			t.Errorf("Elapsed(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestAmounts(t *testing.T) {
	tests := []struct{ got, want string }{
		{cli.GiB(0), "0"},
		{cli.GiB(16 << 30), "16"},
		{cli.GiB(15<<30 + 1<<29), "15.5"},
		{cli.GiB(1 << 20), "<0.1"},
		{cli.Cores(4000), "4"},
		{cli.Cores(500), "0.5"},
		{cli.Cores(1250), "1.25"},
		{cli.Number(0.1+0.2, 2), "0.3"},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("case %d: got %q, want %q", i, tt.got, tt.want)
		}
	}
}

func TestTimestamp(t *testing.T) {
	loc := time.FixedZone("X", -5*3600)
	if got := cli.Timestamp(time.Time{}, loc); got != "-" {
		t.Errorf("zero time: %q", got)
	}
	ts := time.Date(2025, 1, 2, 8, 4, 5, 0, time.UTC)
	if got, want := cli.Timestamp(ts, loc), "2025-01-02 03:04:05"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestShellJoin(t *testing.T) {
	got := cli.ShellJoin([]string{"python", "-c", "print('hi')", "a b", "--lr=0.1"})
	want := `python -c 'print('\''hi'\'')' 'a b' --lr=0.1`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestFailPrintsOneLine(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"plain", errors.New("boom"), "bqueue: boom\n"},
		{"multi-line", errors.New("job.hcl:3:1: bad\n\n  more\n"), "bqueue: job.hcl:3:1: bad; more\n"},
		{"unreachable", fmt.Errorf("%w at unix:///tmp/x.sock: %v", client.ErrUnreachable, errors.New("connect: no such file or directory")),
			"bqueue: cannot reach schedd at unix:///tmp/x.sock: connect: no such file or directory\n"},
		{"refusal", &client.APIError{Status: 400, Message: "can never fit partition gpu"}, "bqueue: can never fit partition gpu\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if code := cli.Fail(&b, "bqueue", tt.err); code != 1 {
				t.Errorf("code %d, want 1", code)
			}
			if b.String() != tt.want {
				t.Errorf("got %q, want %q", b.String(), tt.want)
			}
		})
	}
}

func TestTableCells(t *testing.T) {
	var b bytes.Buffer
	tb := cli.NewTable(&b, "A", "BB")
	tb.Row("", "x\ty\nz")
	tb.Row("long cell", "1")
	if err := tb.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "A          BB\n-          x y z\nlong cell  1\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	if strings.Count(b.String(), "\n") != 3 {
		t.Error("a row spans lines")
	}
}

func TestParseJobID(t *testing.T) {
	for _, s := range []string{"1", "42", "18446744073709551615"} {
		if _, err := cli.ParseJobID(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"", "0", "-1", "x", "4.2", "99999999999999999999"} {
		if _, err := cli.ParseJobID(s); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
}

func TestSortQueue(t *testing.T) {
	jobs := []api.Job{
		{ID: 1, State: api.JobCompleted},
		{ID: 2, State: api.JobPending, Priority: 10, QueuePosition: 2},
		{ID: 3, State: api.JobHeld},
		{ID: 4, State: api.JobPending, Priority: 50, QueuePosition: 1},
		{ID: 5, State: api.JobRunning},
		{ID: 6, State: api.JobPending}, // not ranked yet
		{ID: 7, State: api.JobPending, Priority: 10, QueuePosition: 1},
	}
	var got []uint64
	for _, j := range cli.SortQueue(jobs) {
		got = append(got, j.ID)
	}
	if want := []uint64{5, 4, 7, 2, 6, 3, 1}; !slices.Equal(got, want) {
		t.Fatalf("queue order %v, want %v", got, want)
	}
}

// TestExitCodeViewsAgree (issue 14 item 6f): bjob, bqueue -o exit_code
// and bhist show one exit code for a job; a TIMEOUT job shows what main1
// ended with when its walltime stopped it (LSF: "exit code 140"), where
// bhist said 0 and bjob "-".
func TestExitCodeViewsAgree(t *testing.T) {
	now := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	main1 := api.Container{ContainerSpec: wire.ContainerToAPI(jobspec.Container{Host: "main1", Role: "main", Idx: 1}), State: api.ContainerKilled, ExitCode: 143}
	j := api.Job{ID: 22, Name: "slow", State: api.JobTimeout, Containers: []api.Container{main1}, Submitted: now, Ended: now}
	h := api.HistoryJob{ID: 22, Name: "slow", State: api.JobTimeout, Submitted: now, Ended: now,
		Containers: []api.HistoryContainer{{Host: "main1", State: api.ContainerKilled, ExitCode: 143}}}

	var bjob, bhist, bhistLong, bjobs bytes.Buffer
	if err := cli.WriteJob(&bjob, j, now); err != nil {
		t.Fatal(err)
	}
	if err := cli.WriteHistory(&bhist, []api.HistoryJob{h}, time.UTC); err != nil {
		t.Fatal(err)
	}
	if err := cli.WriteHistoryLong(&bhistLong, []api.HistoryJob{h}, time.UTC); err != nil {
		t.Fatal(err)
	}
	fields, delim, err := cli.ParseBjobsFormat("exit_code delimiter=','")
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.WriteBjobsFields(&bjobs, []api.Job{j}, fields, delim, false, now); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s*Exit code:\s+143$`).MatchString(bjob.String()) {
		t.Errorf("bjob:\n%s\nwant Exit code: 143", bjob.String())
	}
	if row := strings.Fields(strings.Split(bhist.String(), "\n")[1]); len(row) < 6 || row[5] != "143" {
		t.Errorf("bhist:\n%s\nwant EXIT 143", bhist.String())
	}
	if !regexp.MustCompile(`(?m)^\s*Exit code:\s+143$`).MatchString(bhistLong.String()) {
		t.Errorf("bhist -l:\n%s\nwant Exit code: 143", bhistLong.String())
	}
	if got := strings.TrimSpace(bjobs.String()); got != "143" {
		t.Errorf("bqueue -o exit_code: %q, want 143", got)
	}
	// A job cancelled before main1 ran has no exit code anywhere.
	j.State, j.Containers[0].State, j.Containers[0].ExitCode = api.JobCancelled, api.ContainerPending, 0
	h.State, h.Containers[0].State, h.Containers[0].ExitCode = api.JobCancelled, api.ContainerKilled, 0
	h.Containers = nil
	if a, b := cli.JobExitCode(j), cli.HistoryExitCode(h); a != "" || b != "" {
		t.Errorf("cancelled before it ran: bjob %q, bhist %q, want none", a, b)
	}
}

// TestSlurmElapsed: sacct's Elapsed pads the hours under a day
// ("01:02:03", where squeue's Elapsed writes "1:02:03") and is the same
// D-HH:MM:SS from a day on; clock skew shows as zero.
func TestSlurmElapsed(t *testing.T) {
	for in, want := range map[time.Duration]string{
		-time.Second:    "00:00:00",
		0:               "00:00:00",
		5 * time.Second: "00:00:05",
		time.Hour + 2*time.Minute + 3*time.Second:    "01:02:03",
		24*time.Hour - time.Nanosecond:               "23:59:59",
		24 * time.Hour:                               "1-00:00:00",
		51*time.Hour + 4*time.Minute + 5*time.Second: "2-03:04:05",
	} {
		if got := cli.SlurmElapsed(in); got != want {
			t.Errorf("SlurmElapsed(%v) = %q, want %q", in, got, want)
		}
		if in >= 24*time.Hour && cli.Elapsed(in) != want {
			t.Errorf("Elapsed(%v) = %q, want sacct's %q from a day on", in, cli.Elapsed(in), want)
		}
	}
}

// TestJSONListAsWriteJSON: a list written an element at a time reads
// byte for byte as WriteJSON writes the whole list, empty ones too.
func TestJSONListAsWriteJSON(t *testing.T) {
	jobs := []api.Job{
		{ID: 1, Name: "a<b>&c", User: "alice", State: api.JobPending},
		{ID: 2, Name: "two", User: "bob", State: api.JobRunning, Containers: []api.Container{}},
		{ID: 3, Name: "three", Array: &api.Array{Count: 2}},
	}
	for n := range len(jobs) + 1 {
		var want, got strings.Builder
		if err := cli.WriteJSON(&want, jobs[:n]); err != nil {
			t.Fatal(err)
		}
		l := cli.NewJSONList(&got)
		for _, j := range jobs[:n] {
			if err := l.Add(j); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%d jobs:\ngot:\n%s\nwant:\n%s", n, got.String(), want.String())
		}
	}
}
