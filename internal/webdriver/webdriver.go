// Package webdriver drives headless Chromium through chromedriver over
// the W3C WebDriver protocol (plain HTTP and JSON), for the tests of
// schedd's web page (sched/web, e2e). Tests that call Find skip, saying
// why, where Chromium or chromedriver is not installed
// (contrib/dev/install-deps installs them).
//
// It imports no troupe package.
package webdriver

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Driver is a chromedriver session.
type Driver struct {
	t    testing.TB
	base string // http://127.0.0.1:PORT/session/ID
	// Timeout bounds WaitText (default 15s).
	Timeout time.Duration
}

// Find finds Chromium and chromedriver, or skips the test.
func Find(t testing.TB) (browser, driver string) {
	t.Helper()
	driver, err := exec.LookPath("chromedriver")
	if err != nil {
		t.Skip("SKIP: chromedriver not found; install chromium and chromium-driver (contrib/dev/install-deps) to test the web page in a browser")
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if browser, err = exec.LookPath(name); err == nil {
			return browser, driver
		}
	}
	t.Skip("SKIP: chromium not found; install chromium (contrib/dev/install-deps) to test the web page in a browser")
	return "", ""
}

// Start starts chromedriver and a headless Chromium session (a 1400×900
// window); both are killed when the test ends.
func Start(t testing.TB, browser, driver string) *Driver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	profile := t.TempDir()
	cmd := exec.Command(driver, "--port="+strconv.Itoa(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// chromedriver, Chromium and its helpers share the process group
		// started here; anything that left it still names our profile.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		for i := 0; killByArg(t, "--user-data-dir="+profile) > 0; i++ {
			if i == 50 {
				t.Errorf("chromium processes of this test outlived it")
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if t.Failed() {
			t.Logf("chromedriver:\n%s", logs.String())
		}
	})
	root := "http://127.0.0.1:" + strconv.Itoa(port)
	wd := &Driver{t: t, base: root, Timeout: 15 * time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var st struct {
			Ready bool `json:"ready"`
		}
		if err := wd.do("GET", "/status", nil, &st); err == nil && st.Ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chromedriver did not come up:\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome",
		"goog:chromeOptions": map[string]any{"binary": browser, "args": []string{
			"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
			"--window-size=1400,900", "--hide-scrollbars", "--force-device-scale-factor=1", "--user-data-dir=" + profile,
		}},
	}}}
	if err := wd.do("POST", "/session", caps, &sess); err != nil {
		t.Fatalf("starting Chromium: %v\n%s", err, logs.String())
	}
	wd.base = root + "/session/" + sess.SessionID
	t.Cleanup(func() { _ = wd.do("DELETE", "", nil, nil) })
	return wd
}

// killByArg kills the processes whose command line holds arg (Chromium
// helpers that left the process group) and says how many there were.
func killByArg(t testing.TB, arg string) int {
	n := 0
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(arg)) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil && pid != os.Getpid() {
			t.Logf("killing leftover chromium process %d", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			n++
		}
	}
	return n
}

// do makes one WebDriver call; out receives the answer's "value".
func (wd *Driver) do(method, path string, in, out any) error {
	var body bytes.Buffer
	if in != nil {
		if err := json.NewEncoder(&body).Encode(in); err != nil {
			return err
		}
	}
	req, err := http.NewRequest(method, wd.base+path, &body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var res struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return fmt.Errorf("%s %s: %d: %v", method, path, resp.StatusCode, err)
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s %s: %d: %s", method, path, resp.StatusCode, res.Value)
	}
	if out != nil {
		return json.Unmarshal(res.Value, out)
	}
	return nil
}

// Post makes a WebDriver call (path after the session's) and returns its value.
func (wd *Driver) Post(path string, in any) json.RawMessage {
	wd.t.Helper()
	var out json.RawMessage
	if err := wd.do("POST", path, in, &out); err != nil {
		wd.t.Fatal(err)
	}
	return out
}

// Script runs js in the page and returns its result as text.
func (wd *Driver) Script(js string) string {
	wd.t.Helper()
	out := wd.Post("/execute/sync", map[string]any{"script": js, "args": []any{}})
	var s string
	if json.Unmarshal(out, &s) == nil {
		return s
	}
	return string(out)
}

// WaitText waits until the element at css shows want in its text.
func (wd *Driver) WaitText(css, want string) {
	wd.t.Helper()
	js := fmt.Sprintf(`const e = document.querySelector(%q); return e ? e.textContent : "(no element)"`, css)
	deadline := time.Now().Add(wd.Timeout)
	for {
		got := wd.Script(js)
		if strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			wd.t.Fatalf("%s shows %q, want %q in it", css, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitScript waits until js (a function body that returns a value)
// returns want.
func (wd *Driver) WaitScript(js, want string) {
	wd.t.Helper()
	deadline := time.Now().Add(wd.Timeout)
	for {
		got := wd.Script(js)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			wd.t.Fatalf("%s: %q, want %q", js, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Click clicks the element at css as a user would, finding it again if
// a refresh replaced it in between.
func (wd *Driver) Click(css string) {
	wd.t.Helper()
	wd.onElement(css, "click", map[string]any{})
}

// Type types text into the element at css as a user would, key by key
// ("\n" is Enter).
func (wd *Driver) Type(css, text string) {
	wd.t.Helper()
	wd.onElement(css, "value", map[string]any{"text": text})
}

// onElement finds the element at css and POSTs in to its action.
func (wd *Driver) onElement(css, action string, in any) {
	wd.t.Helper()
	var err error
	for range 5 {
		var el map[string]string
		if err = wd.do("POST", "/element", map[string]any{"using": "css selector", "value": css}, &el); err != nil {
			break
		}
		for _, id := range el { // the key is the W3C element identifier
			err = wd.do("POST", "/element/"+id+"/"+action, in, nil)
		}
		if err == nil || !strings.Contains(err.Error(), "stale element") {
			break
		}
	}
	if err != nil {
		wd.t.Fatal(err)
	}
}

// NewTab opens a blank tab and makes it the current window; back
// closes it and returns to the window that was current before.
func (wd *Driver) NewTab() (back func()) {
	wd.t.Helper()
	var was string
	if err := wd.do("GET", "/window", nil, &was); err != nil {
		wd.t.Fatal(err)
	}
	var tab struct {
		Handle string `json:"handle"`
	}
	if err := wd.do("POST", "/window/new", map[string]any{"type": "tab"}, &tab); err != nil {
		wd.t.Fatal(err)
	}
	wd.Post("/window", map[string]any{"handle": tab.Handle})
	return func() {
		wd.t.Helper()
		if err := wd.do("DELETE", "/window", nil, nil); err != nil {
			wd.t.Fatal(err)
		}
		wd.Post("/window", map[string]any{"handle": was})
	}
}

// Screenshot is a PNG of the window.
func (wd *Driver) Screenshot() []byte {
	wd.t.Helper()
	var b64 string
	if err := wd.do("GET", "/screenshot", nil, &b64); err != nil {
		wd.t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		wd.t.Fatal(err)
	}
	return b
}

// Cookie is one cookie of the browser's, as WebDriver reports it.
type Cookie struct {
	Name     string `json:"name"`
	Value    string `json:"value"`
	Domain   string `json:"domain"`
	Path     string `json:"path"`
	Secure   bool   `json:"secure"`
	HTTPOnly bool   `json:"httpOnly"`
	SameSite string `json:"sameSite"`
}

// Cookies are the cookies the browser sends the current page's
// address, HttpOnly ones too (which the page's scripts cannot read).
func (wd *Driver) Cookies() []Cookie {
	wd.t.Helper()
	var cs []Cookie
	if err := wd.do("GET", "/cookie", nil, &cs); err != nil {
		wd.t.Fatal(err)
	}
	return cs
}
