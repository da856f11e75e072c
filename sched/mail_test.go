package sched

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/state"
)

// fakeSendmail puts a stand-in sendmail first on PATH that records each
// run (its arguments, uid and stdin) in a file of its own, and returns
// a function listing the records in the order they were made.
func fakeSendmail(t *testing.T) func() []string {
	t.Helper()
	// Not t.TempDir: its parent is 0700, and as root schedd runs
	// sendmail as the job's user, who must reach the stand-in.
	dir, err := os.MkdirTemp("", "sendmail")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	rec := filepath.Join(dir, "rec")
	if err := os.Mkdir(rec, 0o777); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o755)
	_ = os.Chmod(rec, 0o777)
	script := "#!/bin/sh\n{ echo \"ARGS:$*\"; echo \"UID:$(id -u)\"; cat; } > " + rec + "/tmp.$$ && mv " + rec + "/tmp.$$ " + rec + "/mail.$(date +%s%N).$$\n"
	if err := os.WriteFile(filepath.Join(dir, "sendmail"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return func() []string {
		names, _ := filepath.Glob(filepath.Join(rec, "mail.*"))
		sort.Strings(names)
		var out []string
		for _, n := range names {
			b, _ := os.ReadFile(n)
			out = append(out, string(b))
		}
		return out
	}
}

// openAt is a controller on dir (kept across calls) behind an HTTP
// server; stop ends both.
func openAt(t *testing.T, dir string) (*Server, *client.Client, func()) {
	t.Helper()
	return openConfig(t, Config{DataDir: dir})
}

// openConfig is a controller of cfg (its Logger silent) behind an HTTP
// server; stop ends both, keeping cfg's data dir for another to open.
func openConfig(t testing.TB, cfg Config) (*Server, *client.Client, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	hs := httptest.NewServer(srv.Handler())
	c, err := client.New(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	return srv, c, func() { hs.Close(); cancel(); <-done; srv.Close() }
}

// runToEnd starts job id's one container on n1 and ends it with code.
func runToEnd(t *testing.T, c *client.Client, id uint64, code int) {
	t.Helper()
	ctx := context.Background()
	waitJob(t, c, id, func(j api.Job) bool { return j.State == api.JobScheduled })
	report := func(st api.ContainerState) {
		if err := c.Report(ctx, "n1", api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: id, Host: "main1", State: st, ExitCode: code}}}); err != nil {
			t.Fatal(err)
		}
	}
	report(api.ContainerRunning)
	waitJob(t, c, id, func(j api.Job) bool { return j.State == api.JobRunning })
	report(api.ContainerExited)
	waitJob(t, c, id, func(j api.Job) bool { return j.State.Terminal() })
}

func waitMails(t *testing.T, mails func() []string, n int) []string {
	t.Helper()
	return eventually.Value(t, 20*time.Second, fmt.Sprintf("%d mails sent", n), func() ([]string, bool) {
		got := mails()
		return got, len(got) >= n
	})
}

// TestJobMail (issue 14 item 6j): a job asking for mail at its start and
// end gets one mail each, through sendmail -t -i with the addresses in
// the To: header only, run as the job's user; a restarted schedd (a new
// leader) does not send them again.
func TestJobMail(t *testing.T) {
	mails := fakeSendmail(t)
	dir := t.TempDir()
	srv, c, stop := openAt(t, dir)
	register(t, c, "n1", 4)
	ctx := context.Background()
	sp := spec(1, jobspec.ModeSingleNode, 1)
	sp.Name = "train"
	sp.Mail = &jobspec.Mail{To: "ada@example.org, bob", Begin: true, End: true}
	res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(sp), UID: 1000, GID: 1000, User: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	runToEnd(t, c, res.JobID, 3)
	got := waitMails(t, mails, 2)
	wantUID := "UID:" + strconv.Itoa(os.Geteuid()) // sendmail runs as schedd's user
	if os.Geteuid() == 0 {
		wantUID = "UID:1000" // as root, as the job's user
	}
	for i, want := range [][]string{
		{"ARGS:-t -i\n", wantUID + "\n", "To: ada@example.org, bob\r\n", "Subject: troupe job 1 (train) began\r\n", "Started:"},
		{"ARGS:-t -i\n", "To: ada@example.org, bob\r\n", "Subject: troupe job 1 (train) ended FAILED, exit code 3\r\n", "Run time:"},
	} {
		for _, w := range want {
			if !strings.Contains(got[i], w) {
				t.Errorf("mail %d lacks %q:\n%s", i+1, w, got[i])
			}
		}
	}
	if j := srv.st.Snapshot().Job(res.JobID); !slices.Equal(j.Mailed, []string{"begin/0", "end"}) {
		t.Errorf("job marks %q, want begin/0 and end", j.Mailed)
	}
	stop()

	// A new leader on the same log: job 1's mail is not sent again; a
	// job asking for mail on failure only, that completes, gets none;
	// one asking for the end does.
	_, c, stop = openAt(t, dir)
	defer stop()
	register(t, c, "n1", 4)
	quiet := spec(1, jobspec.ModeSingleNode, 1)
	quiet.Mail = &jobspec.Mail{Fail: true}
	r2, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(quiet), UID: 1000, GID: 1000, User: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	runToEnd(t, c, r2.JobID, 0)
	loud := spec(1, jobspec.ModeSingleNode, 1)
	loud.Mail = &jobspec.Mail{End: true}
	r3, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(loud), UID: 1000, GID: 1000, User: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	runToEnd(t, c, r3.JobID, 0)
	got = waitMails(t, mails, 3)
	if len(got) != 3 || !strings.Contains(got[2], "Subject: troupe job 3 (t) ended COMPLETED, exit code 0\r\n") || !strings.Contains(got[2], "To: ada\r\n") {
		t.Fatalf("after the restart: %d mails, want job 3's end only, to its user:\n%s", len(got), strings.Join(got, "\n---\n"))
	}
}

// TestMailStatesCoverMailDue: mailLoop walks only the jobs in
// mailStates (not the queue); a job in any other state, started and
// ended as far as its times go, with every mail wanted, has none due.
func TestMailStatesCoverMailDue(t *testing.T) {
	all := []api.JobState{api.JobPending, api.JobHeld, api.JobScheduled, api.JobPreparing, api.JobRunning,
		api.JobCompleted, api.JobFailed, api.JobCancelled, api.JobTimeout, api.JobNodeFail}
	for _, st := range all {
		j := &state.Job{ID: 1, State: st, Spec: state.Spec{Mail: &state.Mail{To: "ada@example.org", Begin: true, End: true, Fail: true}}}
		if st != api.JobPending && st != api.JobHeld && st != api.JobScheduled && st != api.JobPreparing {
			j.Started = time.Now() // a queued job has none: set at RUNNING, cleared on requeue
		}
		if due := mailDue(j); len(due) > 0 && !slices.Contains(mailStates, st) {
			t.Errorf("a %s job has mail due (%v) but mailLoop does not walk %s jobs", st, due, st)
		}
	}
}
