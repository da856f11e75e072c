package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
	"github.com/troupe-hpc/troupe/internal/webdriver"
	"github.com/troupe-hpc/troupe/sched"
	"github.com/troupe-hpc/troupe/sched/web"
)

// TestAnotherUsersAppInChromium: two users' apps open in one browser.
// Alice is logged in to schedd's web page and has her app (job 12) open
// through her bapp; bob sends her the link of his bapp (job 13), and she
// opens it in the same headless Chromium. Bob's app records every
// Cookie header it gets and answers Set-Cookie for the web session
// (plain and __Host-), for alice's bapp key's name and for Jupyter's
// _xsrf, each also with Domain=localhost. Bob's app must see none of
// alice's cookies (nor its page's scripts), and alice's web session,
// her bapp key and her app's own cookie must be as they were; what bob
// got opens neither her session (GET /session, whose CSRF token would
// let him submit as her) nor her app. The web page is opened as
// 127.0.0.1 and as localhost, the names bapp used to share with it.
func TestAnotherUsersAppInChromium(t *testing.T) {
	browser, driver := webdriver.Find(t)
	for _, pageHost := range []string{"127.0.0.1", "localhost"} {
		t.Run(pageHost, func(t *testing.T) { anotherUsersApp(t, browser, driver, pageHost) })
	}
}

func anotherUsersApp(t *testing.T, browser, driver, pageHost string) {
	page, aliceToken := webPage(t, pageHost, "alice", 1001)

	s := clitest.NewSchedd(t)
	var mu sync.Mutex
	var bobGot []string // the Cookie headers bob's app got
	var aliceKey string // her bapp key's cookie name (bob sees her port)
	app := func(owner string, h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer trp_"+owner {
				http.Error(w, "not "+owner, http.StatusForbidden)
				return
			}
			h(w, r)
		}
	}
	s.Handle("/apps/12/web/", app("alice", func(w http.ResponseWriter, r *http.Request) {
		// Jupyter's XSRF cookie: its page's script reads it.
		w.Header().Add("Set-Cookie", "_xsrf=alice-xsrf; Path=/")
		fmt.Fprint(w, "<!doctype html><title>alice's app</title><p>alice's notebook")
	}))
	s.Handle("/apps/13/web/", app("bob", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		bobGot = append(bobGot, r.Header.Values("Cookie")...)
		key := aliceKey
		mu.Unlock()
		for _, c := range []string{web.CookieName + "=bob", web.SecureCookieName + "=bob", key + "=bob", "_xsrf=bob"} {
			w.Header().Add("Set-Cookie", c+"; Path=/; Secure")
			w.Header().Add("Set-Cookie", c+"; Domain=localhost; Path=/")
		}
		w.Header().Add("Set-Cookie", web.CookieName+"=bob; Path=/")
		w.Header().Add("Set-Cookie", key+"=bob; Path=/")
		fmt.Fprint(w, "<!doctype html><title>bob's app</title><p>bob's app")
	}))
	aliceF, aliceLink := forward(t, s, "trp_alice", 12, "web")
	_, bobLink := forward(t, s, "trp_bob", 13, "web")
	au, _ := url.Parse(aliceLink)
	mu.Lock()
	aliceKey = aliceF.cookie
	mu.Unlock()

	wd := webdriver.Start(t, browser, driver)
	wd.Timeout = 60 * time.Second // a loaded machine
	open := func(u, title string) {
		t.Helper()
		wd.Post("/url", map[string]any{"url": u})
		if st, got := navStatus(wd), wd.Script(`return document.title`); st != "200" || got != title {
			t.Fatalf("Chromium at %s: %s %q, want 200 %q", u, st, got, title)
		}
	}

	// Alice logs in to the web page and opens her app.
	wd.Post("/url", map[string]any{"url": page + "/"})
	wd.WaitText("#live", "live")
	wd.Click("#login-open")
	wd.Type("#login-token", aliceToken+"\n")
	wd.WaitText("#who", "alice")
	pageCookies := wd.Cookies()
	if len(pageCookies) != 1 || pageCookies[0].Name != web.CookieName {
		t.Fatalf("the web page's cookies: %+v, want the session's", pageCookies)
	}
	open(aliceLink, "alice's app")
	appCookies := wd.Cookies()
	if len(appCookies) != 2 {
		t.Errorf("alice's app's cookies: %+v, want bapp's key and the app's _xsrf only", appCookies)
	}
	alices := map[string]bool{}
	for _, c := range append(pageCookies, appCookies...) {
		alices[c.Value] = true
	}

	// Alice opens bob's link (twice: the second time with what his app
	// set the first), and bob's page's scripts look.
	open(bobLink, "bob's app")
	open(bobLink[:strings.Index(bobLink, "?")], "bob's app")
	seen := wd.Script(`return document.cookie`)
	for v := range alices {
		if strings.Contains(seen, v) {
			t.Errorf("bob's page's scripts read alice's cookie %q: document.cookie = %q", v, seen)
		}
	}
	mu.Lock()
	got := append([]string(nil), bobGot...)
	mu.Unlock()
	if len(got) == 0 {
		t.Fatal("bob's app got no request")
	}
	for _, h := range got {
		for v := range alices {
			if strings.Contains(h, v) {
				t.Errorf("bob's app got alice's cookie %q: Cookie: %s", v, h)
			}
		}
	}

	// Alice's app and web page hold what they held, and still work.
	open(aliceLink[:strings.Index(aliceLink, "?")], "alice's app")
	sameCookies(t, "alice's app", wd.Cookies(), appCookies)
	wd.Post("/url", map[string]any{"url": page + "/"})
	wd.WaitText("#who", "alice")
	sameCookies(t, "the web page", wd.Cookies(), pageCookies)

	// What bob got opens neither alice's session nor her app.
	for _, h := range got {
		req, _ := http.NewRequest("GET", page+"/session", nil)
		req.Header.Set("Cookie", h)
		if code, body := send(t, loopback(nil), req); code != http.StatusOK || !strings.Contains(body, `"user":""`) {
			t.Errorf("bob's GET /session with Cookie: %s: %d %s, want no session", h, code, body)
		}
		req, _ = http.NewRequest("GET", "http://"+au.Host+aliceF.prefix+"/", nil)
		req.Header.Set("Cookie", h)
		if code, body := send(t, loopback(nil), req); code != http.StatusUnauthorized {
			t.Errorf("bob's GET of alice's app with Cookie: %s: %d %q, want 401", h, code, body)
		}
	}
}

// webPage serves schedd's web page (a real controller behind it) on
// 127.0.0.1, as http://host:PORT, and returns it with a token of user's.
func webPage(t *testing.T, host, user string, uid int) (page, token string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := sched.Open(ctx, sched.Config{DataDir: t.TempDir(), JoinToken: "trp_join-token-of-the-test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	ws := httptest.NewServer(web.Handler(srv, web.Output{}))
	t.Cleanup(func() { ws.Close(); cancel(); <-done; srv.Close() })
	res, err := srv.CreateToken(auth.WithIdentity(ctx, auth.Identity{UID: uid, GID: uid, User: user}), api.TokenCreate{})
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(ws.Listener.Addr().(*net.TCPAddr).Port)), res.Secret
}

// sameCookies fails unless got holds want's cookies, no more, unchanged.
func sameCookies(t *testing.T, where string, got, want []webdriver.Cookie) {
	t.Helper()
	key := func(cs []webdriver.Cookie) string {
		var out []string
		for _, c := range cs {
			out = append(out, fmt.Sprintf("%s=%s domain=%s path=%s", c.Name, c.Value, c.Domain, c.Path))
		}
		sort.Strings(out) // WebDriver's order is not the browser's
		return strings.Join(out, "; ")
	}
	if key(got) != key(want) {
		t.Errorf("%s's cookies changed: %s, were %s", where, key(got), key(want))
	}
}

func send(t *testing.T, hc *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// navStatus is the HTTP status of the page Chromium shows.
func navStatus(wd *webdriver.Driver) string {
	return wd.Script(`const n = performance.getEntriesByType("navigation")[0]; return n ? String(n.responseStatus) : "no navigation"`)
}
