package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
	"github.com/troupe-hpc/troupe/internal/client"
)

// appSchedd is a fake schedd serving job 12's service web at /apps/12/web/:
// it answers what it got (path, Authorization, Cookie), and echoes lines
// after an Upgrade to /apps/12/web/ws.
func appSchedd(t *testing.T) *clitest.Schedd {
	s := clitest.NewSchedd(t)
	s.Handle("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		j := api.Job{ID: 12, Spec: api.JobSpec{Services: []api.Service{{Name: "web", Port: 8000}}}}
		clitest.JSON(w, http.StatusOK, 1, j)
	})
	s.Handle("/apps/12/web/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apps/12/web/ws" {
			c, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
			_ = brw.Flush()
			for {
				line, err := brw.ReadString('\n')
				if err != nil {
					return
				}
				_, _ = brw.WriteString("echo " + line)
				_ = brw.Flush()
			}
		}
		w.Header().Add("Set-Cookie", "app=1; Path=/")
		w.Header().Add("Set-Cookie", "wide=2; Domain=localhost; Path=/; HttpOnly")
		w.Header().Add("Set-Cookie", keyCookie+"0=forged; Path=/")
		w.Header().Add("Set-Cookie", "troupe_session=fixed; Path=/")
		w.Header().Add("Set-Cookie", "__Host-troupe_session=fixed; Path=/; Secure")
		w.Header().Add("Set-Cookie", "=troupe_session=fixed")
		fmt.Fprintf(w, "path=%s auth=%s cookie=%s host=%s", r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("Cookie"), r.Host)
	})
	return s
}

// forward serves a forwarder to s's job job's service on a local port,
// for token's owner, and returns it with the link bapp prints.
func forward(t *testing.T, s *clitest.Schedd, token string, job uint64, service string) (f *forwarder, link string) {
	t.Helper()
	c, err := client.NewWith(s.Addr, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(nil)
	port := hs.Listener.Addr().(*net.TCPAddr).Port
	f = newForwarder(c.AppTransport(), job, service, port)
	hs.Config.Handler = f
	hs.Start()
	t.Cleanup(hs.Close)
	return f, f.link(port)
}

// loopback is a client that reaches every host name on this machine's
// loopback, as browsers do *.localhost (Go's resolver does not).
func loopback(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
	}}}
}

// TestForward: the link names the app's own host name, and its key
// becomes a cookie; requests with it reach the service under the same
// path with the user's token, without the key or any other cookie of
// troupe's; requests without it, sent by another origin, or naming
// another host (127.0.0.1 too) stop here. The app's cookies go back to
// the browser for its host name only, and none of troupe's names.
func TestForward(t *testing.T) {
	s := appSchedd(t)
	f, link := forward(t, s, "trp_user", 12, "web")
	u, err := url.Parse(link)
	if err != nil || !strings.HasSuffix(u.Hostname(), hostSuffix) || strings.Count(u.Hostname(), ".") != 1 || !strings.Contains(u.Hostname(), f.host) ||
		u.Path != "/apps/12/web/" || u.Query().Get(keyParam) != f.key {
		t.Fatalf("bapp's link %q: want http://RANDOM.localhost:PORT/apps/12/web/?%s=KEY (%v)", link, keyParam, err)
	}
	if o := newForwarder(nil, 12, "web", 1); o.host == f.host || o.key == f.key {
		t.Errorf("two forwarders share a host name or a key: %s %s", o.host, f.host)
	}
	base := "http://" + u.Host
	f.cookie = keyCookie + "0" // the fake app forges this one
	jar, _ := cookiejar.New(nil)
	browser := loopback(jar)
	get := func(cl *http.Client, path string, h ...string) (int, string, []string) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		for i := 0; i+1 < len(h); i += 2 {
			if h[i] == "Host" {
				req.Host = h[i+1]
			} else {
				req.Header.Add(h[i], h[i+1])
			}
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Values("Set-Cookie")
	}
	if code, _, _ := get(browser, "/apps/12/web/"); code != http.StatusUnauthorized {
		t.Errorf("without the key: %d, want 401", code)
	}
	if code, _, _ := get(browser, "/apps/12/web/?"+keyParam+"=wrong"); code != http.StatusUnauthorized {
		t.Errorf("a wrong key: %d, want 401", code)
	}
	code, body, _ := get(browser, "/apps/12/web/x?a=1&"+keyParam+"="+f.key)
	if code != http.StatusOK || body != "path=/apps/12/web/x?a=1 auth=Bearer trp_user cookie= host="+u.Host {
		t.Fatalf("following the link: %d %q", code, body)
	}
	// The app's own cookies go back to it; the key never does, nor the
	// web page's session or another bapp's key, and the app can set
	// none of them nor a cookie for a wider domain.
	code, body, set := get(browser, "/apps/12/web/y", "Cookie", "troupe_session=s; __Host-troupe_session=h; troupe-key-1=k; __Secure-Troupe-x=1; other=3")
	if code != http.StatusOK || body != "path=/apps/12/web/y auth=Bearer trp_user cookie=other=3; app=1; wide=2 host="+u.Host {
		t.Errorf("with the cookie: %d %q", code, body)
	}
	if want := []string{"app=1; Path=/", "wide=2; Path=/; HttpOnly"}; strings.Join(set, "\n") != strings.Join(want, "\n") {
		t.Errorf("the app's Set-Cookie as the browser gets it: %q, want %q", set, want)
	}
	if code, _, _ := get(browser, "/"); code != http.StatusOK {
		t.Errorf("/ (redirected to the service): %d", code)
	}
	for _, h := range [][]string{
		{"Origin", "http://evil.example"},
		{"Origin", "http://127.0.0.1:1"},
		{"Origin", "http://" + f.host + ".evil.example"},
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		// DNS rebinding, and the names every other page of this machine
		// shares.
		{"Host", "rebound.example:80"},
		{"Host", "127.0.0.1:" + u.Port()},
		{"Host", "localhost:" + u.Port()},
		{"Host", "other.localhost:" + u.Port()},
		{"Host", "x." + f.host + ":" + u.Port()},
	} {
		// The refusal of another host name does not say the app's.
		if code, body, _ := get(browser, "/apps/12/web/z", h...); code != http.StatusForbidden || (h[0] == "Host" && strings.Contains(body, f.host)) {
			t.Errorf("a request with %s: %s: %d %q, want 403", h[0], h[1], code, body)
		}
	}
	if code, _, _ := get(browser, "/apps/12/web/z", "Origin", base, "Sec-Fetch-Site", "same-origin"); code != http.StatusOK {
		t.Errorf("the app's own page's request: %d, want 200", code)
	}
	// Through a tunnel whose local port is another (80 too).
	for _, h := range []string{strings.ToUpper(f.host) + ":9", f.host} {
		if code, _, _ := get(browser, "/apps/12/web/z", "Host", h, "Origin", "http://"+h); code != http.StatusOK {
			t.Errorf("the app's host name as %s: %d, want 200", h, code)
		}
	}

	// An upgrade goes through both ways.
	conn, err := net.Dial("tcp", "127.0.0.1:"+u.Port())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET /apps/12/web/ws HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nCookie: %s=%s\r\n\r\n", u.Host, f.cookie, f.key)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	_, _ = io.WriteString(conn, "hi\n")
	if got, err := br.ReadString('\n'); err != nil || got != "echo hi\n" {
		t.Fatalf("through the upgraded stream: %q %v", got, err)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"12"}, {"x", "web"}, {"12", "web", "more"}} {
		var out, errb bytes.Buffer
		if code := run(args, strings.NewReader(""), &out, &errb); code != 2 {
			t.Errorf("bapp %q: exit %d, want 2 (stderr %q)", args, code, errb.String())
		}
	}
}

func TestNoSuchService(t *testing.T) {
	s := appSchedd(t)
	var out, errb bytes.Buffer
	code := run([]string{"--addr", s.Addr, "12", "jupyter"}, strings.NewReader(""), &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), `no service "jupyter"; it declares web`) {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}
