package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/internal/freeport"
	"github.com/troupe-hpc/troupe/internal/webdriver"
	"github.com/troupe-hpc/troupe/sched/web"
)

// TestWebTerminal: the page acts on a real cluster. schedd --dev serves
// the page (--web-addr) with a runc nodelet; headless Chromium logs in
// with a token from badmin, submits an interactive job from the page,
// opens its terminal, types hostname and sees main1, starts python3's
// http.server there and reaches it, the job's service, in another tab
// through bapp's link, and kills the job from the page. Another user's session may neither kill the job nor
// attach to it.
func TestWebTerminal(t *testing.T) {
	needRunc(t)
	browser, driver := webdriver.Find(t)
	ba := badmin(t)
	addr := freeport.Addr(t)
	c := startCluster(t, 1, "2", "--web-addr", addr)
	defer c.stop()
	page := "http://" + addr
	waitFor(30*time.Second, func() bool {
		resp, err := http.Get(page + "/session")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
	mine, errOut, code := c.run(c.dir, filepath.Base(ba), "token", "create")
	if code != 0 {
		t.Fatalf("badmin token create: %d %s", code, errOut)
	}
	theirs, errOut, code := c.runAs(65534, c.dir, filepath.Base(ba), "token", "create")
	if code != 0 {
		t.Fatalf("badmin token create as nobody: %d %s", code, errOut)
	}
	mine, theirs = strings.TrimSpace(mine), strings.TrimSpace(theirs)
	out := t.TempDir()

	wd := webdriver.Start(t, browser, driver) // stopped before the cluster
	wd.Timeout = 90 * time.Second             // a container starts on a loaded machine
	wd.Post("/url", map[string]any{"url": page + "/"})
	wd.WaitText("#live", "live")
	wd.Click("#login-open")
	wd.Type("#login-token", mine+"\n")
	wd.WaitText("#who", "root")

	wd.Type("#job-source", `job "webterm" {
  image  = "host"
  output = "`+out+`/web-%j.%h.out"
  resources {
    cpu    = 1
    memory = "256MiB"
  }
  service "files" {
    port = 8000
  }
}
`)
	wd.Click("#job-interactive")
	wd.Click("#job-submit")
	wd.WaitText("#submit-msg", "is submitted to partition")
	m := regexp.MustCompile(`Job <(\d+)>`).FindStringSubmatch(wd.Script(`return document.getElementById('submit-msg').textContent`))
	if m == nil {
		t.Fatal("the page did not name the submitted job")
	}
	id, _ := strconv.ParseUint(m[1], 10, 64)
	row := "#job-" + m[1]
	wd.WaitText(row, "webterm")
	wd.WaitText(row, "RUNNING")
	if j := c.job(id); !j.Interactive || j.UID != 0 || j.User != "root" {
		t.Fatalf("the page's job: interactive %v, uid %d, user %q", j.Interactive, j.UID, j.User)
	}

	// Another user: no kill, no terminal, through the page's endpoints.
	other := otherSession(t, page, theirs)
	if code, body := other.post("/v1/jobs/" + m[1] + "/kill"); code != 403 || !strings.Contains(body, "permission denied") {
		t.Errorf("another user's kill from the page: %d %s; want 403", code, body)
	}
	if msg := other.terminal(id); !strings.Contains(msg, "permission denied") {
		t.Errorf("another user's terminal: %q; want permission denied", msg)
	}

	// The terminal: the shell in main1 answers hostname.
	start := time.Now()
	wd.Click("#act-terminal")
	wd.WaitText("#terminal-status", "attached")
	// Type once the shell has shown its prompt, as a person would.
	var screen string
	if !waitFor(60*time.Second, func() bool {
		screen = wd.Script(`return Term.text()`)
		return strings.TrimSpace(screen) != ""
	}) {
		t.Fatalf("the terminal shows nothing: no prompt")
	}
	wd.Type(".xterm-helper-textarea", "hostname\n")
	waitFor(60*time.Second, func() bool {
		screen = wd.Script(`return Term.text()`)
		for _, l := range strings.Split(screen, "\n") {
			if strings.TrimSpace(l) == "main1" {
				return true
			}
		}
		return false
	})
	if !regexp.MustCompile(`(?m)^main1\s*$`).MatchString(screen) {
		t.Fatalf("the terminal does not show main1 on a line of its own:\n%s", screen)
	}
	t.Logf("terminal: hostname answered %v after the click", time.Since(start).Round(time.Millisecond))
	// A paste larger than one frame (32 KiB) goes through whole.
	wd.Script(`Term.paste(('true ' + '#'.repeat(90) + '\r').repeat(400) + 'echo big-paste-$((40*1000))\r'); return 1`)
	if !waitFor(60*time.Second, func() bool {
		screen = wd.Script(`return Term.text()`)
		// The shell's prompts and the echo of the pasted lines
		// interleave; the command's output is the only 40000.
		return strings.Contains(screen, "big-paste-40000")
	}) {
		t.Fatalf("a 38 KiB paste did not run; the terminal shows:\n%s", screen)
	}
	shot := wd.Screenshot()
	if d := os.Getenv("TROUPE_SCREENSHOT_DIR"); d != "" {
		_ = os.WriteFile(filepath.Join(d, "troupe-web-terminal.png"), shot, 0o644)
	}

	// A web server started in the terminal, the job's service files,
	// in another tab through bapp's link (as TestAppsProxy's chromium).
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Log("SKIP the app step: needs /usr/bin/python3 (a web server in main1)")
	} else {
		wd.Type(".xterm-helper-textarea", "mkdir /tmp/www && cd /tmp/www && echo typed-in-$(hostname) >t.txt && /usr/bin/python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &\n")
		link, stop := startBapp(t, c, id, "files")
		defer stop() // before the cluster's check for leftovers
		start := time.Now()
		back := wd.NewTab()
		openApp(t, wd, link, "/apps/"+m[1]+"/files/", "t.txt", "typed-in-main1")
		t.Logf("app: main1's http.server through bapp in %v", time.Since(start).Round(time.Millisecond))
		back()
		wd.WaitText("#terminal-status", "attached")
	}

	// Kill from the page.
	wd.Click("#act-kill")
	wd.WaitText("#act-kill", "Really kill?")
	wd.Click("#act-kill")
	wd.WaitText(row, "CANCELLED")
	if j := c.waitState(id, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() }); j.State != api.JobCancelled {
		t.Errorf("job %d ended %s, want CANCELLED", id, j.State)
	}
	// The transcript is the job's output, as bpeek shows it.
	if peek, _, _ := c.run(c.dir, "bpeek", m[1]); !strings.Contains(peek, "main1") {
		t.Errorf("bpeek of the page's job lacks its transcript: %q", peek)
	}

	// A batch job's output, followed live from the page: its second line
	// comes while the job runs.
	wd.Script(`document.getElementById('job-source').value = ''; document.getElementById('job-interactive').checked = false; return 1`)
	wd.Type("#job-source", `job "batch" {
  image   = "host"
  output  = "`+out+`/web-%j.%h.out"
  command = ["sh", "-c", "echo first-line; sleep 3; echo $((6*7))-later; sleep 600"]
  resources {
    cpu    = 1
    memory = "256MiB"
  }
}
`)
	wd.Click("#job-submit")
	wd.WaitText("#submit-msg", "Job <")
	m = regexp.MustCompile(`Job <(\d+)>`).FindStringSubmatch(wd.Script(`return document.getElementById('submit-msg').textContent`))
	if m == nil || m[1] == strconv.FormatUint(id, 10) {
		t.Fatalf("the page did not name the second job: %v", m)
	}
	batch, _ := strconv.ParseUint(m[1], 10, 64)
	row = "#job-" + m[1]
	wd.WaitText(row, "RUNNING")
	wd.WaitText("#detail-title", "batch")
	wd.Click("#act-output")
	wd.WaitText("#output", "first-line")
	wd.WaitText("#output", "42-later")
	if j := c.job(batch); j.State != api.JobRunning {
		t.Errorf("the output came after the job ended (%s), not live", j.State)
	}
	if code, body := other.get("/v1/jobs/" + m[1] + "/output"); code != 200 || strings.Contains(body, "first-line") {
		t.Errorf("another user's output request: %d %q; want bpeek's refusal, not the output", code, body)
	}
	wd.Click("#act-kill")
	wd.WaitText("#act-kill", "Really kill?")
	wd.Click("#act-kill")
	wd.WaitText(row, "CANCELLED")
	wd.WaitText("#output-status", "the job has ended")
}

// pageSession is a session on the page made without a browser.
type pageSession struct {
	t            *testing.T
	page, cookie string
	csrf         string
}

func otherSession(t *testing.T, page, secret string) *pageSession {
	t.Helper()
	body, _ := json.Marshal(web.Login{Token: secret})
	req, _ := http.NewRequest("POST", page+"/login", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s web.Session
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || resp.StatusCode != 200 || s.UID != 65534 {
		t.Fatalf("logging in as nobody: %d %+v %v", resp.StatusCode, s, err)
	}
	p := &pageSession{t: t, page: page, csrf: s.CSRF}
	for _, c := range resp.Cookies() {
		if c.Name == web.CookieName {
			p.cookie = c.Value
		}
	}
	return p
}

func (p *pageSession) post(path string) (int, string) { return p.do("POST", path) }

func (p *pageSession) get(path string) (int, string) { return p.do("GET", path) }

func (p *pageSession) do(method, path string) (int, string) {
	p.t.Helper()
	req, _ := http.NewRequest(method, p.page+path, nil)
	req.Header.Set("Origin", p.page)
	req.Header.Set(web.CSRFHeader, p.csrf)
	req.AddCookie(&http.Cookie{Name: web.CookieName, Value: p.cookie})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// terminal opens job's terminal and returns the error frame it answers.
func (p *pageSession) terminal(job uint64) string {
	p.t.Helper()
	cfg, err := websocket.NewConfig("ws"+strings.TrimPrefix(p.page, "http")+"/v1/jobs/"+strconv.FormatUint(job, 10)+"/terminal", p.page)
	if err != nil {
		p.t.Fatal(err)
	}
	cfg.Header = http.Header{"Cookie": {web.CookieName + "=" + p.cookie}}
	ws, err := websocket.DialConfig(cfg)
	if err != nil {
		p.t.Fatalf("terminal handshake: %v", err)
	}
	defer ws.Close()
	var msg []byte
	if err := websocket.Message.Receive(ws, &msg); err != nil {
		p.t.Fatalf("terminal: %v", err)
	}
	f, err := attach.NewReader(strings.NewReader(string(msg))).Next()
	if err != nil || f.Type != attach.Error {
		p.t.Fatalf("terminal answered %q (%v), want an error frame", msg, err)
	}
	return string(f.Payload)
}
