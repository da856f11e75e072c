package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/freeport"
	"github.com/troupe-hpc/troupe/internal/webdriver"
	"github.com/troupe-hpc/troupe/sched/web"
)

// cookieAppPy is bob's app: it keeps the Cookie headers of every request,
// "" for none (GET /log answers them as JSON), and answers each page with Set-Cookie
// for the web page's session, plain and __Host-, and for the names in
// its ?alice= query, each also for Domain=localhost.
const cookieAppPy = `import http.server, json, urllib.parse
got = []
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        if u.path == "/log":
            body = json.dumps(got).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
        else:
            got.append("; ".join(self.headers.get_all("Cookie") or []))
            self.send_response(200)
            for name in ["troupe_session", "__Host-troupe_session"] + urllib.parse.parse_qs(u.query).get("alice", []):
                self.send_header("Set-Cookie", name + "=bob; Path=/")
                self.send_header("Set-Cookie", name + "=bob; Domain=localhost; Path=/")
            self.send_header("Content-Type", "text/html")
            body = b"<!doctype html><title>bob's app</title><p>bob's app"
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", 8000), H).serve_forever()
`

// TestAnotherUsersAppCookies: two users' apps in one browser, on a real
// cluster. Alice (the test's user) is logged in to schedd's web page and
// has her app (python3's http.server in a runc job) open through her
// bapp; bob (uid 65534) runs a job of his own whose app records the
// Cookie headers it gets and answers Set-Cookie for the web session and
// alice's bapp key name, starts bapp for it as himself and sends alice
// the link, which she opens in the same headless Chromium. Bob's app
// gets none of her cookies; her web session and bapp key are unchanged
// and still work; and the Cookie headers bob collected open neither her
// session (GET /session, whose CSRF token would let him submit jobs as
// her) nor her app. Before, bapp served every app as 127.0.0.1, where the
// browser sends each port every other port's cookies, and passed them
// on, and passed the app's Set-Cookie through.
func TestAnotherUsersAppCookies(t *testing.T) {
	needRunc(t)
	browser, driver := webdriver.Find(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("SKIP: needs /usr/bin/python3 (the jobs' web servers, in the host image)")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("SKIP: needs curl (bob's requests on the socket; `make deps` installs it)")
	}
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
	token, errOut, code := c.run(c.dir, filepath.Base(ba), "token", "create")
	if code != 0 {
		t.Fatalf("badmin token create: %d %s", code, errOut)
	}

	// Alice's app, and bob's, each in a job of its user's.
	site := searchable(t)
	for name, body := range map[string]string{"hello.txt": "alice's file\n", "bob.py": cookieAppPy} {
		if err := os.WriteFile(filepath.Join(site, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	job := func(command string) string {
		return fmt.Sprintf(`
job "app" {
  image   = "host"
  command = ["sh", "-c", %q]
  resources {
    cpu    = 1
    memory = "256MiB"
  }
  mount "site" {
    source   = %q
    target   = "/home/work/site"
    readonly = true
  }
  service "web" {
    port = 8000
  }
  output = "app-%%j.out"
}`, command, site)
	}
	alice, _ := c.submit(searchable(t), "alice", job("exec /usr/bin/python3 -m http.server 8000 --bind 127.0.0.1 --directory /home/work/site"))
	bob, _ := c.submitAs(65534, 65534, openDir(t), "bob", job("exec /usr/bin/python3 /home/work/site/bob.py"))
	for _, id := range []uint64{alice, bob} {
		c.waitState(id, 60*time.Second, func(j api.Job) bool { return j.State == api.JobRunning })
	}
	bobApp := "/apps/" + strconv.FormatUint(bob, 10) + "/web/"
	sock := strings.TrimPrefix(c.addr, "unix://")
	asBob := func(args ...string) string { // curl as bob
		cmd := exec.Command(curl, append([]string{"-s"}, args...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, _ := cmd.Output()
		return string(out)
	}
	if !waitFor(60*time.Second, func() bool { return asBob("--unix-socket", sock, "http://troupe"+bobApp+"log") == "[]" }) {
		t.Fatalf("bob's app does not answer: %q", asBob("--unix-socket", sock, "http://troupe"+bobApp+"log"))
	}

	aliceLink, stopAlice := startBapp(t, c, alice, "web")
	defer stopAlice() // before the cluster's check for leftovers
	bobLink, stopBob := startBappAs(t, c, &syscall.Credential{Uid: 65534, Gid: 65534}, bob, "web")
	defer stopBob()
	au, err := url.Parse(aliceLink)
	if err != nil {
		t.Fatal(err)
	}

	wd := webdriver.Start(t, browser, driver) // stopped before the cluster
	wd.Timeout = 60 * time.Second
	wd.Post("/url", map[string]any{"url": page + "/"})
	wd.WaitText("#live", "live")
	wd.Click("#login-open")
	wd.Type("#login-token", strings.TrimSpace(token)+"\n")
	wd.WaitText("#who", "root")
	pageCookies := wd.Cookies()
	openApp(t, wd, aliceLink, "/apps/"+strconv.FormatUint(alice, 10)+"/web/", "hello.txt", "alice's file")
	appCookies := wd.Cookies()
	var keyName string
	alices := map[string]bool{}
	for _, ck := range append(append([]webdriver.Cookie(nil), pageCookies...), appCookies...) {
		alices[ck.Value] = true
		if strings.HasPrefix(ck.Name, "troupe-key-") {
			keyName = ck.Name
		}
	}
	if keyName == "" || len(pageCookies) != 1 || pageCookies[0].Name != web.CookieName {
		t.Fatalf("alice's cookies: the page's %+v, the app's %+v", pageCookies, appCookies)
	}

	// Alice opens bob's link, which asks his app to set her key's name.
	wd.Post("/url", map[string]any{"url": bobLink + "&alice=" + keyName})
	if st, title := navStatus(wd), wd.Script(`return document.title`); st != "200" || title != "bob's app" {
		t.Fatalf("Chromium at bob's link: %s %q", st, title)
	}
	seen := wd.Script(`return document.cookie`)

	// What bob's app and its page's scripts got.
	var got []string
	if err := json.Unmarshal([]byte(asBob("--unix-socket", sock, "http://troupe"+bobApp+"log")), &got); err != nil || len(got) == 0 {
		t.Fatalf("bob's app's log: %v %q", err, got)
	}
	t.Logf("bob's app got Cookie: %q; its page's scripts read %q", got, seen)
	for v := range alices {
		if strings.Contains(seen, v) {
			t.Errorf("bob's page's scripts read alice's cookie %q", v)
		}
		for _, h := range got {
			if strings.Contains(h, v) {
				t.Errorf("bob's app got alice's cookie %q: Cookie: %s", v, h)
			}
		}
	}
	// Bob replays what he got, as himself: no session, no app.
	for _, h := range got {
		if body := asBob("-H", "Cookie: "+h, page+"/session"); !strings.Contains(body, `"user":""`) {
			t.Errorf("bob's GET /session with Cookie: %s: %s, want no session", h, body)
		}
		if code := asBob("-o", "/dev/null", "-w", "%{http_code}", "-H", "Cookie: "+h, "--connect-to", au.Host+":127.0.0.1:"+au.Port(), "http://"+au.Host+"/apps/"+strconv.FormatUint(alice, 10)+"/web/hello.txt"); code != "401" {
			t.Errorf("bob's GET of alice's app with Cookie: %s: %s, want 401", h, code)
		}
	}

	// Alice's app and page: the same cookies, and they still work.
	bare := aliceLink[:strings.Index(aliceLink, "?")]
	wd.Post("/url", map[string]any{"url": bare})
	if st, body := navStatus(wd), wd.Script(bodyText); st != "200" || !strings.Contains(body, "hello.txt") {
		t.Errorf("alice's app after bob's: %s %q, want 200 and the listing", st, body)
	}
	sameCookies(t, "alice's app", wd.Cookies(), appCookies)
	wd.Post("/url", map[string]any{"url": page + "/"})
	sameCookies(t, "the web page", wd.Cookies(), pageCookies)
	wd.WaitText("#who", "root")
}

// sameCookies fails unless got holds want's cookies, no more, unchanged.
func sameCookies(t *testing.T, where string, got, want []webdriver.Cookie) {
	t.Helper()
	key := func(cs []webdriver.Cookie) map[string]string {
		m := map[string]string{}
		for _, c := range cs {
			m[c.Name+" "+c.Domain+" "+c.Path] = c.Value
		}
		return m
	}
	g, w := key(got), key(want)
	if fmt.Sprint(g) != fmt.Sprint(w) {
		t.Errorf("%s's cookies changed: %v, were %v", where, g, w)
	}
}
