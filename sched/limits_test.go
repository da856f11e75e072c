package sched

import (
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/admission"
)

// dirSize is the bytes of the files under dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSubmitCapsInput is issue 19's attack: a user submits 40 held jobs
// with a 4 MiB environment value. Each is refused, naming the setting,
// and neither the queue nor the raft log grows.
func TestSubmitCapsInput(t *testing.T) {
	dir := t.TempDir()
	srv, _ := clusterWith(t, Config{DataDir: dir})
	_ = srv
	mallory := auth.Identity{UID: 1003, GID: 1003, User: "mallory"}
	before := dirSize(t, srv.cfg.DataDir)
	sp := spec(1, jobspec.ModeSingleNode, 1)
	sp.Env = map[string]string{"BIG": strings.Repeat("x", 4<<20-200)}
	for i := range 40 {
		code, body := as(srv, mallory, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(sp)})
		if code != http.StatusBadRequest || !strings.Contains(string(body), "env.BIG alone takes") || !strings.Contains(string(body), "max_job_input") {
			t.Fatalf("submit %d with a 4MiB env: %d %.300s", i, code, body)
		}
	}
	if n := len(srv.Store().Snapshot().Jobs()); n != 0 {
		t.Fatalf("refused submissions left %d jobs", n)
	}
	if after := dirSize(t, srv.cfg.DataDir); after-before > 1<<20 {
		t.Fatalf("the data dir grew from %d to %d bytes over refused submissions", before, after)
	}
	// A long command line is refused too, naming the argument.
	sp = spec(1, jobspec.ModeSingleNode, 1)
	sp.Command = []string{"echo", strings.Repeat("y", 70<<10)}
	if code, body := as(srv, mallory, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(sp)}); code != http.StatusBadRequest || !strings.Contains(string(body), "command.1 alone takes") {
		t.Fatalf("submit with a 70KiB argument: %d %.300s", code, body)
	}
	// Within the cap, a job is taken.
	sp.Command = []string{"echo", strings.Repeat("y", 30<<10)}
	if code, body := as(srv, mallory, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(sp)}); code != http.StatusCreated {
		t.Fatalf("submit with a 30KiB argument: %d %.300s", code, body)
	}
}

// TestSubmitInputCapConfigurable: schedd's MaxJobInput sets the cap, and
// one above a quarter of the body limit is refused at start.
func TestSubmitInputCapConfigurable(t *testing.T) {
	srv, _ := clusterWith(t, Config{MaxJobInput: 1024})
	alice := auth.Identity{UID: 1001, GID: 1001, User: "alice"}
	sp := spec(1, jobspec.ModeSingleNode, 1)
	sp.Env = map[string]string{"V": strings.Repeat("v", 2000)}
	if code, body := as(srv, alice, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(sp)}); code != http.StatusBadRequest || !strings.Contains(string(body), "of 1024 bytes") {
		t.Fatalf("submit over a 1KiB cap: %d %s", code, body)
	}
	if _, err := Open(context.Background(), Config{DataDir: t.TempDir(), MaxJobInput: 4 << 20}); err == nil || !strings.Contains(err.Error(), "max_job_input") {
		t.Fatalf("Open with a 4MiB input cap: %v", err)
	}
}

// TestQueuedPerUserLimit: a user may have MaxQueuedPerUser jobs pending
// or held; the next is refused with the limit's name, others are not
// affected, and a slot frees when a job leaves the queue.
func TestQueuedPerUserLimit(t *testing.T) {
	srv, _ := clusterWith(t, Config{MaxQueuedPerUser: 3})
	alice := auth.Identity{UID: 1001, GID: 1001, User: "alice"}
	bob := auth.Identity{UID: 1002, GID: 1002, User: "bob"}
	submit := func(id auth.Identity, hold bool) (int, string, uint64) {
		code, body := as(srv, id, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), Hold: hold})
		var res api.SubmitResponse
		_ = json.Unmarshal(body, &res)
		return code, string(body), res.JobID
	}
	var first uint64
	for i := range 3 {
		code, body, id := submit(alice, i%2 == 0)
		if code != http.StatusCreated {
			t.Fatalf("alice's job %d: %d %s", i+1, code, body)
		}
		if i == 0 {
			first = id
		}
	}
	code, body, _ := submit(alice, true)
	if code != http.StatusTooManyRequests || !strings.Contains(body, "already has 3 jobs pending or held") || !strings.Contains(body, "max_queued_per_user 3") {
		t.Fatalf("alice's 4th job: %d %s", code, body)
	}
	if code, body, _ := submit(bob, false); code != http.StatusCreated {
		t.Fatalf("bob's job: %d %s", code, body)
	}
	if code, body := as(srv, alice, "POST", "/v1/jobs/"+jsonNum(first)+"/kill", struct{}{}); code != http.StatusOK {
		t.Fatalf("kill: %d %s", code, body)
	}
	if code, body, _ := submit(alice, false); code != http.StatusCreated {
		t.Fatalf("alice's job after a kill: %d %s", code, body)
	}
}

// TestQueuedPerUserDefault: without a setting the cap is
// DefaultMaxQueuedPerUser; a negative one is unlimited.
func TestQueuedPerUserDefault(t *testing.T) {
	srv, _ := cluster(t)
	if srv.cfg.MaxQueuedPerUser != DefaultMaxQueuedPerUser || srv.cfg.MaxJobInput != jobspec.DefaultMaxInput {
		t.Fatalf("defaults: max_queued_per_user %d, max_job_input %d", srv.cfg.MaxQueuedPerUser, srv.cfg.MaxJobInput)
	}
	srv, _ = clusterWith(t, Config{MaxQueuedPerUser: -1})
	if p := admission.QueueLimits(admitView{srv.Store().Snapshot(), &srv.nodes}, srv.admission(), &admission.Job{UID: 1}, nil); p != nil {
		t.Fatal(p)
	}
}

// TestSubmitRefusesUnrunnable: values no node can run are refused at
// submit through the API (a hand-made body, not bsub), naming the
// setting, and nothing is stored.
func TestSubmitRefusesUnrunnable(t *testing.T) {
	srv, c := cluster(t)
	register(t, c, "n1", 4)
	alice := auth.Identity{UID: 1001, GID: 1001, User: "alice"}
	base := `"name":"a","image":"host","command":["true"],"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1,"memory":1073741824}`
	tests := []struct{ name, body, want string }{
		{"cpu 1e308", `{"spec":{"name":"a","image":"host","command":["true"],"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1e308,"memory":1073741824}}}`, "cpu 1e+308 is not valid"},
		{"gpu 1e9", `{"spec":{"name":"a","image":"host","command":["true"],"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1,"memory":1073741824,"gpu":1e9}}}`, "gpu 1e+09 is not valid"},
		{"memory 8EiB", `{"spec":{"name":"a","image":"host","command":["true"],"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1,"memory":9223372036854775807}}}`, "memory 9223372036854775807 is not valid"},
		{"negative memory", `{"spec":{"name":"a","image":"host","command":["true"],"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1,"memory":-5}}}`, "memory -5 is not valid"},
		{"NUL in command", `{"spec":{"name":"a","image":"host","command":["sh","-c","a\u0000b"],"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1,"memory":1073741824}}}`, "command[2] holds a NUL byte"},
		{"NUL in env", `{"spec":{` + base + `,"env":{"K":"a\u0000b"}}}`, "env K holds a NUL byte"},
		{"NUL in name", `{"spec":{"name":"a\u0000b","image":"host","command":["true"],"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1,"memory":1073741824}}}`, "job name"},
		{"NUL in mount", `{"spec":{` + base + `,"mounts":[{"name":"d","source":"/srv/\u0000d","target":"/d"}]}}`, `mount "d" source`},
		{"image ../../etc", `{"spec":{"name":"a","image":"../../etc","command":["true"],"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1,"memory":1073741824}}}`, `image "../../etc" is not valid`},
		{"image /x/../etc", `{"spec":{"name":"a","image":"/x/../etc","command":["true"],"cluster":{"size":1,"mode":"single-node"},"resources":{"cpu":1,"memory":1073741824}}}`, `climbs out`},
		{"relative cwd", `{"spec":{` + base + `},"cwd":"home/alice"}`, `cwd "home/alice"`},
		{"NUL in cwd", `{"spec":{` + base + `},"cwd":"/home/\u0000alice"}`, `holds a NUL byte`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := as(srv, alice, "POST", "/v1/jobs", jsonRaw(tt.body))
			var e api.Error
			_ = json.Unmarshal(body, &e)
			if code != http.StatusBadRequest || !strings.Contains(e.Error, tt.want) {
				t.Fatalf("%d %s\nwant 400 holding %q", code, body, tt.want)
			}
		})
	}
	if n := len(srv.Store().Snapshot().Jobs()); n != 0 {
		t.Fatalf("refused submissions left %d jobs", n)
	}
}

// TestQueuedTotalLimit: all users together may have MaxQueued jobs
// pending or held; the next submission, whoever sends it, is refused
// with the limit's name, a job array counts once, and a slot frees when
// a job leaves the queue.
func TestQueuedTotalLimit(t *testing.T) {
	srv, _ := clusterWith(t, Config{MaxQueued: 3})
	alice := auth.Identity{UID: 1001, GID: 1001, User: "alice"}
	bob := auth.Identity{UID: 1002, GID: 1002, User: "bob"}
	submit := func(id auth.Identity, sp jobspec.Job) (int, string, uint64) {
		code, body := as(srv, id, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(sp)})
		var res api.SubmitResponse
		_ = json.Unmarshal(body, &res)
		return code, string(body), res.JobID
	}
	arr := spec(1, jobspec.ModeSingleNode, 1)
	arr.Array = &jobspec.Array{Range: "1-50"}
	var first uint64
	for i, s := range []struct {
		id auth.Identity
		sp jobspec.Job
	}{{alice, spec(1, jobspec.ModeSingleNode, 1)}, {bob, arr}, {alice, spec(1, jobspec.ModeSingleNode, 1)}} {
		code, body, id := submit(s.id, s.sp)
		if code != http.StatusCreated {
			t.Fatalf("job %d: %d %s", i+1, code, body)
		}
		if i == 0 {
			first = id
		}
	}
	if n := len(srv.Store().Snapshot().JobsIn(api.JobPending)); n < 50 {
		t.Fatalf("%d pending rows, want the array's elements' too", n)
	}
	code, body, _ := submit(bob, spec(1, jobspec.ModeSingleNode, 1))
	if code != http.StatusTooManyRequests || !strings.Contains(body, "already holds 3 jobs pending or held") || !strings.Contains(body, "max_queued 3") {
		t.Fatalf("the 4th job: %d %s", code, body)
	}
	if code, body := as(srv, alice, "POST", "/v1/jobs/"+jsonNum(first)+"/kill", struct{}{}); code != http.StatusOK {
		t.Fatalf("kill: %d %s", code, body)
	}
	if code, body, _ := submit(bob, spec(1, jobspec.ModeSingleNode, 1)); code != http.StatusCreated {
		t.Fatalf("bob's job after a kill: %d %s", code, body)
	}
}
