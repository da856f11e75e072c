package nodelet

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
)

// pipeSchedd hands the test schedd's end of each stream the agent
// connects.
type pipeSchedd struct {
	*fakeSchedd
	ends chan net.Conn
}

func (p *pipeSchedd) AttachConnect(context.Context, string, string) (io.ReadWriteCloser, error) {
	mine, theirs := net.Pipe()
	p.ends <- theirs
	return mine, nil
}

// TestStreamCapsNodelet: past the cap per job or per user the nodelet
// refuses a stream before it opens the terminal or dials the port, and
// says which cap on the stream (api.AppBusy for an app, which schedd
// turns into 429); a released place serves the next stream.
func TestStreamCapsNodelet(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sched := &pipeSchedd{ends: make(chan net.Conn, 4)}
	job := func(id uint64) api.AssignedJob {
		return api.AssignedJob{ID: id, UID: 1002, User: "bob", Spec: api.JobSpec{Services: []api.Service{{Name: "web", Port: 8000}}}}
	}
	a := (&agent{cfg: Config{Name: "n1"}, log: testLog(), cli: sched, running: map[key]*task{
		{job: 7, host: "main1"}: {key: key{job: 7, host: "main1"}, job: job(7)},
		{job: 8, host: "main1"}: {key: key{job: 8, host: "main1"}, job: job(8)},
		{job: 9, host: "main1"}: {key: key{job: 9, host: "main1"}, job: job(9)},
	}}).wire()
	a.sessions.streams = newStreams(Config{Name: "n1", MaxStreamsPerJob: 1, MaxStreamsPerUser: 2})
	// said is what the nodelet writes on the stream of request r.
	said := func(serve func(context.Context, api.AttachRequest), r api.AttachRequest) string {
		t.Helper()
		go serve(ctx, r)
		select {
		case end := <-sched.ends:
			defer end.Close()
			_ = end.SetReadDeadline(time.Now().Add(10 * time.Second))
			b, _ := io.ReadAll(end)
			return string(b)
		case <-time.After(10 * time.Second):
			t.Fatalf("no stream connected for %+v", r)
		}
		return ""
	}
	app7 := api.AttachRequest{JobID: 7, Host: "main1", Port: 8000}
	release7, err := a.sessions.takeStream(app7) // one stream of job 7 open
	if err != nil {
		t.Fatal(err)
	}
	if got := said(a.sessions.serveApp, app7); !strings.HasPrefix(got, api.AppBusy) || !strings.Contains(got, "--max-streams-per-job") {
		t.Errorf("an app stream past the cap per job: %q, want %q naming --max-streams-per-job", got, api.AppBusy)
	}
	if got := said(a.sessions.serveAttach, api.AttachRequest{JobID: 7, Host: "main1"}); !strings.Contains(got, "--max-streams-per-job") {
		t.Errorf("a terminal past the cap per job: %q, want a refusal naming --max-streams-per-job", got)
	}
	release8, err := a.sessions.takeStream(api.AttachRequest{JobID: 8, Host: "main1"})
	if err != nil {
		t.Fatal(err)
	}
	defer release8()
	if got := said(a.sessions.serveApp, api.AttachRequest{JobID: 9, Host: "main1", Port: 8000}); !strings.HasPrefix(got, api.AppBusy) || !strings.Contains(got, "--max-streams-per-user") {
		t.Errorf("an app stream past the cap per user: %q, want %q naming --max-streams-per-user", got, api.AppBusy)
	}
	// Job 7's stream ends: the next one is served (this node has no
	// session network, so it says so instead of dialing).
	release7()
	if got := said(a.sessions.serveApp, app7); !strings.HasPrefix(got, "error: ") || !strings.Contains(got, "serves no apps") {
		t.Errorf("after the release: %q, want the stream served (the node's own refusal to dial)", got)
	}
	eventually.True(t, 10*time.Second, "the served stream's place freed", func() bool {
		ofJob, _, _ := a.sessions.streams.Open(1002, 7)
		return ofJob == 0
	})
}
