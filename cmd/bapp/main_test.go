package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
)

// appSchedd is a fake schedd serving job 12's service web at /apps/12/web/:
// it answers what it got (path, Authorization, Cookie), and echoes lines
// after an Upgrade to /apps/12/web/ws.
func appSchedd(t *testing.T) *clitest.Schedd {
	s := clitest.NewSchedd(t)
	s.Handle("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		j := api.Job{ID: 12, Spec: jobspec.Job{Services: []jobspec.Service{{Name: "web", Port: 8000}}}}
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
		w.Header().Add("Set-Cookie", keyCookie+"0=forged; Path=/")
		fmt.Fprintf(w, "path=%s auth=%s cookie=%s host=%s", r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("Cookie"), r.Host)
	})
	return s
}

// forward serves a forwarder to s's job 12 service web on a local port.
func forward(t *testing.T, s *clitest.Schedd) (*httptest.Server, *forwarder) {
	t.Helper()
	c, err := client.NewWith(s.Addr, client.Options{Token: "trp_user"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(nil)
	f := newForwarder(c.AppTransport(), 12, "web", hs.Listener.Addr().(*net.TCPAddr).Port)
	hs.Config.Handler = f
	hs.Start()
	t.Cleanup(hs.Close)
	return hs, f
}

// TestForward: the link's key becomes a cookie; requests with it reach
// the service under the same path with the user's token, without the
// key; requests without it, or sent by another origin, stop here.
func TestForward(t *testing.T) {
	s := appSchedd(t)
	hs, f := forward(t, s)
	f.cookie = keyCookie + "0" // the fake app forges this one
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	get := func(cl *http.Client, path string, h ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", hs.URL+path, nil)
		for i := 0; i+1 < len(h); i += 2 {
			req.Header.Set(h[i], h[i+1])
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(browser, "/apps/12/web/"); code != http.StatusUnauthorized {
		t.Errorf("without the key: %d, want 401", code)
	}
	if code, _ := get(browser, "/apps/12/web/?"+keyParam+"=wrong"); code != http.StatusUnauthorized {
		t.Errorf("a wrong key: %d, want 401", code)
	}
	code, body := get(browser, "/apps/12/web/x?a=1&"+keyParam+"="+f.key)
	host := strings.TrimPrefix(hs.URL, "http://")
	if code != http.StatusOK || body != "path=/apps/12/web/x?a=1 auth=Bearer trp_user cookie= host="+host {
		t.Fatalf("following the link: %d %q", code, body)
	}
	// The app's own cookie goes back to it; the key never does, and the
	// app cannot replace it.
	code, body = get(browser, "/apps/12/web/y")
	if code != http.StatusOK || body != "path=/apps/12/web/y auth=Bearer trp_user cookie=app=1 host="+host {
		t.Errorf("with the cookie: %d %q", code, body)
	}
	if code, _ := get(browser, "/"); code != http.StatusOK {
		t.Errorf("/ (redirected to the service): %d", code)
	}
	for _, h := range [][]string{
		{"Origin", "http://evil.example"},
		{"Origin", "http://127.0.0.1:1"},
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
	} {
		if code, _ := get(browser, "/apps/12/web/z", h...); code != http.StatusForbidden {
			t.Errorf("a request with %s: %s: %d, want 403", h[0], h[1], code)
		}
	}
	req, _ := http.NewRequest("GET", hs.URL+"/apps/12/web/z", nil)
	req.Host = "rebound.example:80"
	if resp, err := browser.Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a request naming another host: %s, want 403", resp.Status)
	}
	if code, _ := get(browser, "/apps/12/web/z", "Origin", hs.URL, "Sec-Fetch-Site", "same-origin"); code != http.StatusOK {
		t.Errorf("the app's own page's request: %d, want 200", code)
	}

	// An upgrade goes through both ways.
	conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET /apps/12/web/ws HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nCookie: %s=%s\r\n\r\n", strings.TrimPrefix(hs.URL, "http://"), f.cookie, f.key)
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
