package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/internal/webdriver"
)

// echoPy answers an HTTP Upgrade with 101, then echoes each line back:
// the app end of a WebSocket, without the framing.
const echoPy = `import socket, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8001))
s.listen()
def serve(c):
    f = c.makefile("rb")
    while f.readline() not in (b"\r\n", b"\n", b""):
        pass
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
    for line in f:
        c.sendall(b"echo " + line)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`

// TestAppsProxy: a runc job declares two services, python3's
// http.server (of a folder main1 fills: the test's hello.txt and a
// host.txt naming main1) and an Upgrade echo, both listening on main1's
// loopback only. Its owner GETs a file through schedd's
// /apps/JOB/files/ and talks through an upgraded /apps/JOB/echo/
// stream; a "browser" fetches the file through bapp's local port, and
// headless Chromium (subtest chromium) is refused there without the
// key and with bapp's link sees the listing and main1's file. Another
// user gets 403; an undeclared service is 404; a port the job listens
// on but did not declare cannot be named at all; a declared port only
// the node's loopback serves is refused (502), never the node's; after
// the job ends the URL is refused.
func TestAppsProxy(t *testing.T) {
	needRunc(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("SKIP: needs /usr/bin/python3 (the job's web server, in the host image)")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("SKIP: needs curl (another user's request on the socket; `make deps` installs it)")
	}
	c := startCluster(t, 1, "2")
	// A server on the node's own loopback: a service on its port must
	// not reach it (the nodelet dials inside main1's namespace).
	node := listenInNetNS(t, c.hostNamespaces(1)[0], "127.0.0.1:0", "node-loopback")
	nodePort := node.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	site := filepath.Join(dir, "site")
	if err := os.Mkdir(site, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"hello.txt": "hello through the proxy\n", "echo.py": echoPy} {
		if err := os.WriteFile(filepath.Join(site, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	id, _ := c.submit(dir, "apps", fmt.Sprintf(`
job "apps" {
  image   = "host"
  command = ["sh", "-c", "/usr/bin/python3 /home/work/site/echo.py & /usr/bin/python3 -m http.server 8002 --bind 127.0.0.1 --directory /tmp & mkdir /tmp/www && cp /home/work/site/hello.txt /tmp/www/ && echo served-by-$(hostname) >/tmp/www/host.txt && cd /tmp/www && exec /usr/bin/python3 -m http.server 8000 --bind 127.0.0.1"]
  mount "site" {
    source   = %q
    target   = "/home/work/site"
    readonly = true
  }
  service "files" {
    port = 8000
  }
  service "echo" {
    port = 8001
  }
  service "node" {
    port = %d
  }
  output = "apps-%%j.out"
}`, site, nodePort))
	c.waitState(id, 60*time.Second, func(j api.Job) bool { return j.State == api.JobRunning })

	sock := strings.TrimPrefix(c.addr, "unix://")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := hc.Get("http://troupe" + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	apps := "/apps/" + strconv.FormatUint(id, 10)

	// The server may still be starting: 502 (refused) until it listens.
	var code int
	var body string
	eventually.Within(30*time.Second, func() bool {
		code, body = get(apps + "/files/hello.txt")
		return code != http.StatusBadGateway
	})
	if code != http.StatusOK || body != "hello through the proxy\n" {
		t.Fatalf("the owner's GET: %d %q", code, body)
	}
	if code, body := get(apps + "/files/"); code != http.StatusOK || !strings.Contains(body, "hello.txt") {
		t.Errorf("the listing: %d %q", code, body)
	}
	if code, body := get(apps + "/ssh/"); code != http.StatusNotFound || !strings.Contains(body, "declares files, echo, node") {
		t.Errorf("an undeclared service: %d %s", code, body)
	}
	// Port 8002 serves /tmp in main1, but no service names it: nothing
	// reaches it (a service is named, never numbered).
	if code, _ := get(apps + "/8002/"); code != http.StatusNotFound {
		t.Errorf("an undeclared port: %d, want 404", code)
	}

	// A declared port nothing in main1 listens on, though the node's
	// loopback does: refused in the container, the node's server never
	// answers.
	if code, body := get(apps + "/node/"); code != http.StatusBadGateway || !strings.Contains(body, "refused") || strings.Contains(body, "node-loopback") {
		t.Errorf("a port only the node listens on: %d %s, want 502 connection refused", code, body)
	}

	// Another user, on the same socket.
	other := exec.Command(curl, "-s", "-o", "/dev/null", "-w", "%{http_code}", "--unix-socket", sock, "http://troupe"+apps+"/files/hello.txt")
	other.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := other.Output(); err != nil || string(out) != "403" {
		t.Errorf("another user's GET: %q %v, want 403", out, err)
	}

	// An upgraded stream carries bytes both ways.
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "GET %s/echo/ HTTP/1.1\r\nHost: troupe\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", apps)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade through /apps: %v %v", resp, err)
	}
	for _, msg := range []string{"one\n", "two\n"} {
		_, _ = io.WriteString(conn, msg)
		if got, err := br.ReadString('\n'); err != nil || got != "echo "+msg {
			t.Fatalf("through the upgraded stream: %q %v, want %q", got, err, "echo "+msg)
		}
	}
	conn.Close()

	// bapp: a browser on this machine, through a local port, under the
	// app's own host name (RANDOM.localhost, which browsers resolve to
	// the loopback; Go's resolver does not, so the client dials it).
	link, _ := startBapp(t, c, id, "files")
	lu, err := url.Parse(link)
	if err != nil || !strings.HasSuffix(lu.Hostname(), ".localhost") || !strings.Contains(link, apps+"/files/?troupe-key=") {
		t.Fatalf("bapp printed %q, want http://RANDOM.localhost:PORT%s/files/?troupe-key=KEY", link, apps)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, "127.0.0.1:"+lu.Port())
	}}}
	for _, u := range []string{strings.TrimSpace(link), strings.TrimSpace(link[:strings.Index(link, apps)]) + apps + "/files/hello.txt"} {
		resp, err := browser.Get(u)
		if err != nil {
			t.Fatalf("through bapp: GET %s: %v", u, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "hello") {
			t.Errorf("through bapp: GET %s: %d %q", u, resp.StatusCode, b)
		}
	}

	// By the address, the name every page of this machine shares: no.
	if resp, err := browser.Get("http://127.0.0.1:" + lu.Port() + apps + "/files/hello.txt"); err != nil {
		t.Errorf("bapp by its address: %v", err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusForbidden {
		t.Errorf("bapp by its address: %s, want 403", resp.Status)
	}

	t.Run("chromium", func(t *testing.T) { appInChromium(t, link, apps+"/files/") })

	// bjob shows the services' paths.
	if out, _, _ := c.run(dir, "bjob", strconv.FormatUint(id, 10)); !strings.Contains(out, apps+"/files/") {
		t.Errorf("bjob does not show the service files:\n%s", out)
	}

	if _, _, code := c.run(dir, "bkill", strconv.FormatUint(id, 10)); code != 0 {
		t.Fatalf("bkill exited %d", code)
	}
	c.waitState(id, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() })
	if code, body := get(apps + "/files/hello.txt"); code != http.StatusConflict {
		t.Errorf("after the job ended: %d %s, want 409", code, body)
	}
}

// startBapp runs bapp for job's service on c and returns the link it
// printed; stop (or the test's end) stops it.
func startBapp(t *testing.T, c *devCluster, job uint64, service string) (link string, stop func()) {
	t.Helper()
	return startBappAs(t, c, nil, job, service)
}

// startBappAs is startBapp run with cred (nil: the test's user).
func startBappAs(t *testing.T, c *devCluster, cred *syscall.Credential, job uint64, service string) (link string, stop func()) {
	t.Helper()
	fwd := exec.Command(bin+"/bapp", "--addr", c.addr, strconv.FormatUint(job, 10), service)
	if cred != nil {
		fwd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := fwd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := fwd.Start(); err != nil {
		t.Fatal(err)
	}
	stop = sync.OnceFunc(func() { _ = fwd.Process.Kill(); _ = fwd.Wait() })
	t.Cleanup(stop)
	link, err = bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("bapp %d %s printed %q: %v", job, service, link, err)
	}
	return strings.TrimSpace(link), stop
}

// appInChromium: headless Chromium, as a person would, opens an app
// forwarded by bapp: first by the bare local address, without the key
// (refused, 401, nothing of the app shows), then by the link bapp
// printed (see openApp).
func appInChromium(t *testing.T, link, path string) {
	browser, driver := webdriver.Find(t)
	i := strings.Index(link, path)
	if i < 0 {
		t.Fatalf("bapp's link %q does not hold %s", link, path)
	}
	bare := link[:i] + path
	wd := webdriver.Start(t, browser, driver)
	wd.Timeout = 60 * time.Second // a loaded machine
	wd.Post("/url", map[string]any{"url": bare})
	if st, body := navStatus(wd), wd.Script(bodyText); st != "401" || !strings.Contains(body, "open the link bapp printed") || strings.Contains(body, "hello.txt") {
		t.Errorf("Chromium without the key at %s: %s %q, want 401 and bapp's refusal", bare, st, body)
	}
	start := time.Now()
	openApp(t, wd, link, path, "host.txt", "served-by-main1")
	t.Logf("Chromium: the listing and main1's file through bapp in %v", time.Since(start).Round(time.Millisecond))
}

// openApp opens bapp's link in Chromium, again while the app is not
// up yet (502): the key becomes a cookie the page's scripts cannot read
// and leaves the address bar, python3's http.server lists the folder,
// and its link to file (relative, so resolved under path) shows want.
func openApp(t *testing.T, wd *webdriver.Driver, link, path, file, want string) {
	t.Helper()
	bare := link[:strings.Index(link, path)] + path
	eventually.Within(wd.Timeout, func() bool {
		wd.Post("/url", map[string]any{"url": link})
		return navStatus(wd) != "502"
	})
	if st, title, body := navStatus(wd), wd.Script(`return document.title`), wd.Script(bodyText); st != "200" || title != "Directory listing for /" || !strings.Contains(body, file) {
		t.Fatalf("Chromium through bapp's link: %s, title %q, %q; want 200 and the listing of %s", st, title, body, file)
	}
	if at := wd.Script(`return location.href`); at != bare {
		t.Errorf("after the link Chromium is at %s, want %s (the key out of the address bar)", at, bare)
	}
	if c := wd.Script(`return document.cookie`); strings.Contains(c, "troupe-key") {
		t.Errorf("the page's scripts read the key: document.cookie = %q", c)
	}
	wd.Click(fmt.Sprintf("a[href=%q]", file))
	wd.WaitText("body", want)
	if at := wd.Script(`return location.href`); at != bare+file {
		t.Errorf("the listing's link took Chromium to %s, want %s%s", at, bare, file)
	}
}

// navStatus is the HTTP status of the page Chromium shows.
func navStatus(wd *webdriver.Driver) string {
	return wd.Script(`const n = performance.getEntriesByType("navigation")[0]; return n ? String(n.responseStatus) : "no navigation"`)
}

const bodyText = `return document.body ? document.body.innerText : ""`
