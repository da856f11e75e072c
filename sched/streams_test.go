package sched

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// streamNodelet answers node's requests as the nodelet would: an app's
// by dialing its port on this host's loopback (busy's with api.AppBusy,
// as past the nodelet's own caps), a terminal's by echoing.
func streamNodelet(ctx context.Context, c *client.Client, node string, busy *atomic.Uint64) {
	for ctx.Err() == nil {
		rs, err := c.AttachRequests(ctx, node, time.Second)
		if err != nil {
			continue
		}
		for _, r := range rs.Requests {
			go func() {
				stream, err := c.AttachConnect(ctx, node, r.ID)
				if err != nil {
					return
				}
				if r.Port == 0 {
					_, _ = io.Copy(stream, stream)
					stream.Close()
					return
				}
				if r.JobID == busy.Load() {
					fmt.Fprintf(stream, "%sjob %d has 32 terminal and app streams open, the most nodelet %s allows one job (--max-streams-per-job, max_streams_per_job)\n", api.AppBusy, r.JobID, node)
					stream.Close()
					return
				}
				app, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", r.Port))
				if err != nil {
					fmt.Fprintf(stream, "error: %v\n", err)
					stream.Close()
					return
				}
				_, _ = io.WriteString(stream, api.AppReady)
				attach.Splice(stream, app)
			}()
		}
	}
}

// TestStreamCaps: terminal (attach) and upgraded /apps streams count
// together against the caps per job and per user: past one, the stream
// is refused with 429 and a message naming the cap and its flag; another
// user's streams are not held back; a stream that ends frees its place.
// A plain /apps request is not a stream: it is answered past the caps.
// A nodelet's refusal past its own caps is a 429 too.
func TestStreamCaps(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, c := clusterWith(t, Config{MaxStreamsPerJob: 2, MaxStreamsPerUser: 3})
	register(t, c, "n1", 8)
	backend := appBackend(t)
	port := backend.Listener.Addr().(*net.TCPAddr).Port
	var busy atomic.Uint64
	go streamNodelet(ctx, c, "n1", &busy)
	users := map[string]auth.Identity{
		"alice": {UID: 1001, GID: 1001, User: "alice"},
		"bob":   {UID: 1002, GID: 1002, User: "bob"},
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.Handler().ServeHTTP(w, r.WithContext(auth.WithIdentity(r.Context(), users[r.Header.Get("X-Test-User")])))
	}))
	defer front.Close()

	jobOf := func(user string) uint64 {
		t.Helper()
		sp := spec(1, jobspec.ModeSingleNode, 1)
		sp.Services = []jobspec.Service{{Name: "web", Port: port, Protocol: jobspec.ProtocolHTTP}}
		code, body := as(srv, users[user], "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(sp), Interactive: true})
		if code != http.StatusCreated {
			t.Fatalf("submit: %d %s", code, body)
		}
		var res api.SubmitResponse
		_ = json.Unmarshal(body, &res)
		waitJob(t, c, res.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
		if err := c.Report(ctx, "n1", api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: res.JobID, Host: "main1", State: api.ContainerRunning}}}); err != nil {
			t.Fatal(err)
		}
		waitJob(t, c, res.JobID, func(j api.Job) bool { return j.State == api.JobRunning })
		return res.JobID
	}
	job1, job2, job3 := jobOf("alice"), jobOf("alice"), jobOf("bob")

	// open opens a terminal ("attach") or app stream: the connection
	// once upgraded, else the status and body.
	open := func(user, kind string, job uint64) (net.Conn, int, string) {
		t.Helper()
		conn, err := net.Dial("tcp", strings.TrimPrefix(front.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if kind == "attach" {
			fmt.Fprintf(conn, "POST /v1/jobs/%d/attach HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: %s\r\nContent-Length: 0\r\nX-Test-User: %s\r\n\r\n", job, attach.Upgrade, user)
		} else {
			fmt.Fprintf(conn, "GET /apps/%d/web/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nX-Test-User: %s\r\n\r\n", job, user)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s %s on job %d: %v", user, kind, job, err)
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			_ = conn.SetDeadline(time.Time{})
			return conn, resp.StatusCode, ""
		}
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		return nil, resp.StatusCode, string(b)
	}
	mustOpen := func(user, kind string, job uint64) net.Conn {
		t.Helper()
		conn, code, body := open(user, kind, job)
		if conn == nil {
			t.Fatalf("%s's %s stream on job %d: %d %s, want 101", user, kind, job, code, body)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	refused := func(user, kind string, job uint64, want string) {
		t.Helper()
		conn, code, body := open(user, kind, job)
		if conn != nil {
			conn.Close()
		}
		if code != http.StatusTooManyRequests || !strings.Contains(body, want) {
			t.Errorf("%s's %s stream on job %d past the cap: %d %s, want 429 naming %s", user, kind, job, code, body, want)
		}
	}

	term := mustOpen("alice", "attach", job1)
	mustOpen("alice", "app", job1)
	refused("alice", "attach", job1, "--max-streams-per-job")
	refused("alice", "app", job1, "--max-streams-per-job")
	// Plain requests, several at once, are answered with job1's streams
	// at the cap.
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			req, _ := http.NewRequest("GET", front.URL+fmt.Sprintf("/apps/%d/web/", job1), nil)
			req.Header.Set("X-Test-User", "alice")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				return
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				err = fmt.Errorf("plain GET past the streams cap: %d %s, want 200", res.StatusCode, b)
			}
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	mustOpen("alice", "app", job2)
	refused("alice", "attach", job2, "--max-streams-per-user")
	// bob is not held back by alice's streams.
	mustOpen("bob", "attach", job3)
	mustOpen("bob", "app", job3)

	// The nodelet's own cap: schedd answers 429 with its message.
	job4 := jobOf("bob")
	busy.Store(job4)
	refused("bob", "app", job4, "nodelet n1 allows one job")

	body := scrapeMetrics(t, srv.MetricsHandler())
	if n := metricValue(body, "troupe_schedd_streams_refused_total"); n != 3 {
		t.Errorf("troupe_schedd_streams_refused_total = %g, want 3 (schedd's own caps)", n)
	}
	if n := metricValue(body, "troupe_schedd_streams_open"); n != 5 {
		t.Errorf("troupe_schedd_streams_open = %g, want 5", n)
	}

	// The terminal's end frees its place: once schedd has seen it close,
	// alice opens another.
	term.Close()
	eventually.NoError(t, 10*time.Second, "a terminal opened after closing one", func() error {
		conn, code, body := open("alice", "attach", job1)
		if conn != nil {
			conn.Close()
			return nil
		}
		if code != http.StatusTooManyRequests {
			t.Fatalf("after closing a terminal: %d %s, want 101 (or 429 until schedd sees it closed)", code, body)
		}
		return fmt.Errorf("%d %s", code, body)
	})
}

// TestStreamCapMeaning: a cap of 0 is the default, -1 none, as in the
// nodelet's settings (connlimit.Cap decides both).
func TestStreamCapMeaning(t *testing.T) {
	for _, tt := range []struct {
		job, user, wantJob, wantUser int
	}{{0, 0, 32, 200}, {-1, -1, 0, 0}, {5, 6, 5, 6}} {
		s := newStreams(Config{MaxStreamsPerJob: tt.job, MaxStreamsPerUser: tt.user})
		if s.PerJob != tt.wantJob || s.PerUser != tt.wantUser {
			t.Errorf("caps %d, %d: per job %d, per user %d; want %d, %d (0 is no cap)", tt.job, tt.user, s.PerJob, s.PerUser, tt.wantJob, tt.wantUser)
		}
	}
}
