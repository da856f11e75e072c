package web_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/webdriver"
	"github.com/troupe-hpc/troupe/sched/web"
)

// The page in a real browser: headless Chromium driven by chromedriver
// over the W3C WebDriver protocol (internal/webdriver).
func TestPageInChromium(t *testing.T) {
	browser, driver := webdriver.Find(t)
	srv, page, _ := schedd(t)
	start := time.Now()
	wd := webdriver.Start(t, browser, driver) // stopped before schedd: the page holds a blocking query
	t.Logf("chromium up in %v", time.Since(start).Round(time.Millisecond))
	register(t, srv, "node-a", 4, "rack1", "ib")
	register(t, srv, "node-b", 2)
	small := submit(t, srv, 1000, "small", 1, 4) // fills node-a
	big := submit(t, srv, 1001, "big", 1, 4)     // waits for node-a: pending
	tiny := submit(t, srv, 1000, "tiny", 1, 1)   // on node-b

	wd.Post("/url", map[string]any{"url": page + "/"})
	wd.Script(`window.__mark = 42; return 1`)
	row := func(id uint64) string { return "#job-" + strconv.FormatUint(id, 10) }
	wd.WaitText(row(small), "SCHEDULED")
	wd.WaitText(row(big), "PENDING")
	wd.WaitText(row(big), "Resources")
	for _, want := range []string{"small", "user1000", "default", "node-a"} {
		wd.WaitText(row(small), want)
	}
	wd.WaitText(row(tiny), "node-b")
	// bqueue's order: started jobs, then pending by priority.
	order := wd.Script(`return [...document.querySelectorAll('#queue tbody tr')].map(r => r.dataset.id).join(',')`)
	if !strings.HasPrefix(order, strconv.FormatUint(small, 10)+",") {
		t.Errorf("queue order %s: the started job should come first", order)
	}
	wd.WaitText("#node-node-a", "UP")
	wd.WaitText("#node-node-a", "rack1")
	wd.WaitText("#node-node-a", "4/4") // cpu alloc/total
	wd.WaitText("#node-node-b", "UP")
	wd.WaitText("#partition-default", "default*")
	wd.WaitText("#live", "live")

	shot := wd.Screenshot()
	checkScreenshot(t, shot)
	saveScreenshot(t, "troupe-web.png", shot)

	// A click shows the job's detail: containers, pending reason, priority.
	wd.Click(row(big))
	wd.WaitText("#detail-title", fmt.Sprintf("Job %d: big", big))
	for _, want := range []string{"PENDING", "Resources", "Queue position", "user1001", "main1", "pending", "FAIRSHARE"} {
		wd.WaitText("#detail-body", want)
	}
	if body := wd.Script(`return document.querySelector('#detail-body').textContent`); strings.Contains(body, "secret-command") {
		t.Errorf("the detail shows another user's command: %s", body)
	}
	wd.Click(row(small))
	wd.WaitText("#detail-title", fmt.Sprintf("Job %d: small", small))
	wd.WaitText("#containers", "node-a")
	wd.WaitText("#containers", "10.0.0.") // node address
	wd.WaitText("#containers", "assigned")
	saveScreenshot(t, "troupe-web-detail.png", wd.Screenshot())

	// Changes show without a reload: a kill, a new submission.
	killed := time.Now()
	if _, err := srv.Kill(context.Background(), big); err != nil {
		t.Fatal(err)
	}
	wd.WaitText(row(big), "CANCELLED")
	t.Logf("a kill showed after %v", time.Since(killed).Round(time.Millisecond))
	submitted := time.Now()
	late := submit(t, srv, 1002, "late-arrival", 1, 1)
	wd.WaitText(row(late), "late-arrival")
	t.Logf("a submission showed after %v", time.Since(submitted).Round(time.Millisecond))
	wd.Click(row(late))
	wd.WaitText("#detail-title", "late-arrival")
	if got := wd.Script(`return String(window.__mark)`); got != "42" {
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

// The page acts, in a real browser: log in with a token, submit a job
// file, hold and release it, kill it; another user's job offers no
// buttons.
func TestPageActsInChromium(t *testing.T) {
	browser, driver := webdriver.Find(t)
	me, err := user.Current()
	if err != nil || me.HomeDir == "" {
		t.Skipf("SKIP: this process's user has no home directory (%v): the page submits from there", err)
	}
	srv, page, _ := schedd(t)
	wd := webdriver.Start(t, browser, driver)
	_, secret := token(t, srv, os.Getuid(), me.Username)
	other := submit(t, srv, 4242, "someone-elses", 1, 1)

	wd.Post("/url", map[string]any{"url": page + "/"})
	wd.WaitText("#live", "live")
	if v := wd.Script(`return String(document.getElementById('submit-section').hidden)`); v != "true" {
		t.Errorf("the submit form shows before logging in")
	}
	wd.Click("#login-open")
	wd.Type("#login-token", secret+"\n")
	wd.WaitText("#who", me.Username)
	if d := wd.Script(`return getComputedStyle(document.getElementById('login-form')).display`); d != "none" {
		t.Errorf("the login form still shows (display %s) once logged in", d)
	}
	if c := wd.Script(`return document.cookie`); strings.Contains(c, web.CookieName) {
		t.Errorf("the page's script reads the session cookie: %q", c)
	}

	// Another user's job: no buttons.
	wd.Click("#job-" + strconv.FormatUint(other, 10))
	wd.WaitText("#detail-title", "someone-elses")
	if n := wd.Script(`return String(document.querySelectorAll('#actions button').length)`); n != "0" {
		t.Errorf("another user's job offers %s buttons", n)
	}

	wd.Type("#job-source", "job \"from-chromium\" {\n  image   = \"host\"\n  command = [\"sleep\", \"600\"]\n  resources {\n    cpu    = 1\n    memory = \"256MiB\"\n  }\n}\n")
	wd.Click("#job-hold")
	wd.Click("#job-submit")
	wd.WaitText("#submit-msg", "is submitted to partition <default>")
	var id uint64
	for _, j := range srv.Store().Snapshot().Jobs() {
		if j.Name == "from-chromium" {
			id = j.ID
		}
	}
	if id == 0 {
		t.Fatalf("the page's submission is not in the state; the page says %q", wd.Script(`return document.getElementById('submit-msg').textContent`))
	}
	row := "#job-" + strconv.FormatUint(id, 10)
	wd.WaitText(row, "from-chromium")
	wd.WaitText(row, "HELD")
	wd.WaitText(row, me.Username)
	wd.WaitText("#detail-title", "from-chromium") // the page selects what it submitted
	wd.Click("#act-release")
	wd.WaitText(row, "PENDING")
	wd.Click("#act-hold")
	wd.WaitText(row, "HELD")
	saveScreenshot(t, "troupe-web-actions.png", wd.Screenshot())
	wd.Click("#act-kill")
	wd.WaitText("#act-kill", "Really kill?")
	wd.Script(`renderDetail(); return 1`) // a refresh between the clicks keeps it armed
	wd.WaitText("#act-kill", "Really kill?")
	wd.Click("#act-kill")
	wd.WaitText(row, "CANCELLED")
	if j := srv.Store().Snapshot().Job(id); j.State != api.JobCancelled || j.UID != os.Getuid() {
		t.Errorf("job %d: %s uid %d", id, j.State, j.UID)
	}

	// A bad file's errors show with their line.
	wd.Script(`document.getElementById('job-source').value = ''; return 1`)
	wd.Type("#job-source", "job \"x\" {\n  image = \"host\"\n  colour = 1\n}\n")
	wd.Click("#job-hold")
	wd.Click("#job-submit")
	wd.WaitText("#submit-msg", "job.hcl:3:3: Unsupported argument")

	wd.Click("#logout")
	wd.WaitText("#login-open", "Log in")
	// The form hides as the page redraws after logout.
	wd.WaitScript(`return String(document.getElementById('submit-section').hidden)`, "true")
}
