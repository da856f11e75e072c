package web_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
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

// The page in a real browser: headless Chromium driven by chromedriver
// over the W3C WebDriver protocol (plain HTTP and JSON).
func TestPageInChromium(t *testing.T) {
	browser, driver := chromiumPaths(t)
	srv, page, _ := schedd(t)
	start := time.Now()
	wd := startChromium(t, browser, driver) // stopped before schedd: the page holds a blocking query
	t.Logf("chromium up in %v", time.Since(start).Round(time.Millisecond))
	register(t, srv, "node-a", 4, "rack1", "ib")
	register(t, srv, "node-b", 2)
	small := submit(t, srv, 1000, "small", 1, 4) // fills node-a
	big := submit(t, srv, 1001, "big", 1, 4)     // waits for node-a: pending
	tiny := submit(t, srv, 1000, "tiny", 1, 1)   // on node-b

	wd.post("/url", map[string]any{"url": page + "/"})
	wd.script(`window.__mark = 42; return 1`)
	row := func(id uint64) string { return "#job-" + strconv.FormatUint(id, 10) }
	wd.waitText(row(small), "SCHEDULED")
	wd.waitText(row(big), "PENDING")
	wd.waitText(row(big), "Resources")
	for _, want := range []string{"small", "user1000", "default", "node-a"} {
		wd.waitText(row(small), want)
	}
	wd.waitText(row(tiny), "node-b")
	// bqueue's order: started jobs, then pending by priority.
	order := wd.script(`return [...document.querySelectorAll('#queue tbody tr')].map(r => r.dataset.id).join(',')`)
	if !strings.HasPrefix(order, strconv.FormatUint(small, 10)+",") {
		t.Errorf("queue order %s: the started job should come first", order)
	}
	wd.waitText("#node-node-a", "UP")
	wd.waitText("#node-node-a", "rack1")
	wd.waitText("#node-node-a", "4/4") // cpu alloc/total
	wd.waitText("#node-node-b", "UP")
	wd.waitText("#partition-default", "default*")
	wd.waitText("#live", "live")

	shot := wd.screenshot()
	checkScreenshot(t, shot)
	saveScreenshot(t, "troupe-web.png", shot)

	// A click shows the job's detail: containers, pending reason, priority.
	wd.click(row(big))
	wd.waitText("#detail-title", fmt.Sprintf("Job %d: big", big))
	for _, want := range []string{"PENDING", "Resources", "Queue position", "user1001", "main1", "pending", "FAIRSHARE"} {
		wd.waitText("#detail-body", want)
	}
	if body := wd.script(`return document.querySelector('#detail-body').textContent`); strings.Contains(body, "secret-command") {
		t.Errorf("the detail shows another user's command: %s", body)
	}
	wd.click(row(small))
	wd.waitText("#detail-title", fmt.Sprintf("Job %d: small", small))
	wd.waitText("#containers", "node-a")
	wd.waitText("#containers", "10.0.0.") // node address
	wd.waitText("#containers", "assigned")
	saveScreenshot(t, "troupe-web-detail.png", wd.screenshot())

	// Changes show without a reload: a kill, a new submission.
	killed := time.Now()
	if _, err := srv.Kill(context.Background(), big); err != nil {
		t.Fatal(err)
	}
	wd.waitText(row(big), "CANCELLED")
	t.Logf("a kill showed after %v", time.Since(killed).Round(time.Millisecond))
	submitted := time.Now()
	late := submit(t, srv, 1002, "late-arrival", 1, 1)
	wd.waitText(row(late), "late-arrival")
	t.Logf("a submission showed after %v", time.Since(submitted).Round(time.Millisecond))
	wd.click(row(late))
	wd.waitText("#detail-title", "late-arrival")
	if got := wd.script(`return String(window.__mark)`); got != "42" {
		t.Errorf("the page reloaded (window.__mark = %s)", got)
	}
}

// checkScreenshot checks the PNG is the browser window's size and shows
// the page, not a blank or error screen: many colours (text is
// anti-aliased), the header's colour across the top, the page's
// background, and the state badges' colours.
func checkScreenshot(t *testing.T, shot []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	b := img.Bounds()
	if b.Dx() < 1000 || b.Dy() < 600 {
		t.Errorf("screenshot is %dx%d, want the 1400x900 window", b.Dx(), b.Dy())
	}
	colours := map[[3]uint8]int{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			colours[rgb(img, x, y)]++
		}
	}
	near := func(c [3]uint8) int {
		n := 0
		for k, v := range colours {
			if absDiff(k[0], c[0]) <= 3 && absDiff(k[1], c[1]) <= 3 && absDiff(k[2], c[2]) <= 3 {
				n += v
			}
		}
		return n
	}
	total := b.Dx() * b.Dy()
	head, bg := near([3]uint8{0x1d, 0x35, 0x57}), near([3]uint8{0xee, 0xf1, 0xf5})
	pending, assigned := near([3]uint8{0xc7, 0x7c, 0x02}), near([3]uint8{0x45, 0x7b, 0x9d})
	t.Logf("screenshot %dx%d: %d distinct colours; header %.1f%%, background %.1f%%, PENDING badge %d px, SCHEDULED badge/bars %d px",
		b.Dx(), b.Dy(), len(colours), 100*float64(head)/float64(total), 100*float64(bg)/float64(total), pending, assigned)
	if len(colours) < 64 {
		t.Errorf("screenshot has %d distinct colours: blank?", len(colours))
	}
	if head < b.Dx()*30 {
		t.Errorf("the header colour #1d3557 covers %d pixels, want a band across the top (≥ %d)", head, b.Dx()*30)
	}
	if c := rgb(img, b.Min.X+b.Dx()/2, b.Min.Y+5); absDiff(c[0], 0x1d) > 3 || absDiff(c[2], 0x57) > 3 {
		t.Errorf("top of the page is %v, not the header colour", c)
	}
	if bg < total/20 {
		t.Errorf("the page background covers %d of %d pixels", bg, total)
	}
	if pending < 50 || assigned < 50 {
		t.Errorf("state badges missing: PENDING colour %d px, SCHEDULED colour %d px", pending, assigned)
	}
}

func rgb(img image.Image, x, y int) [3]uint8 {
	r, g, b, _ := img.At(x, y).RGBA()
	return [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8)}
}

func absDiff(a, b uint8) uint8 {
	if a > b {
		return a - b
	}
	return b - a
}

// saveScreenshot writes shot to the test's temp dir and, when
// TROUPE_SCREENSHOT_DIR is set, there too.
func saveScreenshot(t *testing.T, name string, shot []byte) {
	t.Helper()
	dirs := []string{t.TempDir()}
	if d := os.Getenv("TROUPE_SCREENSHOT_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
}

// webDriver is a chromedriver session.
type webDriver struct {
	t       *testing.T
	base    string // http://127.0.0.1:PORT/session/ID
	timeout time.Duration
}

// chromiumPaths finds Chromium and chromedriver, or skips the test.
func chromiumPaths(t *testing.T) (browser, driver string) {
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

// startChromium starts chromedriver and a headless Chromium session; both
// are killed when the test ends.
func startChromium(t *testing.T, browser, driver string) *webDriver {
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
	wd := &webDriver{t: t, base: root, timeout: 15 * time.Second}
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
func killByArg(t *testing.T, arg string) int {
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
func (wd *webDriver) do(method, path string, in, out any) error {
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

func (wd *webDriver) post(path string, in any) json.RawMessage {
	wd.t.Helper()
	var out json.RawMessage
	if err := wd.do("POST", path, in, &out); err != nil {
		wd.t.Fatal(err)
	}
	return out
}

// script runs js in the page and returns its result as text.
func (wd *webDriver) script(js string) string {
	wd.t.Helper()
	out := wd.post("/execute/sync", map[string]any{"script": js, "args": []any{}})
	var s string
	if json.Unmarshal(out, &s) == nil {
		return s
	}
	return string(out)
}

// waitText waits until the element at css shows want in its text.
func (wd *webDriver) waitText(css, want string) {
	wd.t.Helper()
	js := fmt.Sprintf(`const e = document.querySelector(%q); return e ? e.textContent : "(no element)"`, css)
	deadline := time.Now().Add(wd.timeout)
	for {
		got := wd.script(js)
		if strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			wd.t.Fatalf("%s shows %q, want %q in it", css, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// click clicks the element at css as a user would, finding it again if
// a refresh replaced it in between.
func (wd *webDriver) click(css string) {
	wd.t.Helper()
	var err error
	for range 5 {
		var el map[string]string
		if err = wd.do("POST", "/element", map[string]any{"using": "css selector", "value": css}, &el); err != nil {
			break
		}
		for _, id := range el { // the key is the W3C element identifier
			err = wd.do("POST", "/element/"+id+"/click", map[string]any{}, nil)
		}
		if err == nil || !strings.Contains(err.Error(), "stale element") {
			break
		}
	}
	if err != nil {
		wd.t.Fatal(err)
	}
}

func (wd *webDriver) screenshot() []byte {
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
