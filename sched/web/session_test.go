package web_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/websocket"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/sched"
	"github.com/troupe-hpc/troupe/sched/web"
)

// token issues a user token for uid, as that user would over the socket
// (badmin token create): its id and secret.
func token(t *testing.T, srv *sched.Server, uid int, name string) (string, string) {
	t.Helper()
	ctx := auth.WithIdentity(context.Background(), auth.Identity{UID: uid, GID: uid, User: name})
	res, err := srv.CreateToken(ctx, api.TokenCreate{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Token.ID, res.Secret
}

// client is a browser's session on the page: its cookie and CSRF token.
type client struct {
	t      *testing.T
	page   string
	hc     *http.Client
	cookie string
	name   string // the cookie's name, as login answered it
	csrf   string
	origin string // sent as Origin on writes, as a browser does
}

func newClient(t *testing.T, page string) *client {
	return &client{t: t, page: page, hc: http.DefaultClient, origin: page, name: web.CookieName}
}

// login posts the token to /login and keeps the session it answers.
func (c *client) login(secret string) (int, *http.Response, web.Session) {
	c.t.Helper()
	body, _ := json.Marshal(web.Login{Token: secret})
	code, resp, out := c.do("POST", "/login", string(body), nil)
	var s web.Session
	_ = json.Unmarshal([]byte(out), &s)
	for _, ck := range resp.Cookies() {
		if ck.Name == web.CookieName || ck.Name == web.SecureCookieName {
			c.cookie, c.name = ck.Value, ck.Name
		}
	}
	c.csrf = s.CSRF
	return code, resp, s
}

// do sends a request with the session's cookie; writes carry the CSRF
// header unless hdr overrides it.
func (c *client) do(method, path, body string, hdr map[string]string) (int, *http.Response, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.page+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.cookie != "" {
		req.AddCookie(&http.Cookie{Name: c.name, Value: c.cookie})
	}
	if method != "GET" {
		req.Header.Set("Origin", c.origin)
		req.Header.Set(web.CSRFHeader, c.csrf)
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp, string(b)
}

func sessionCookie(t *testing.T, resp *http.Response) *http.Cookie {
	t.Helper()
	for _, c := range resp.Cookies() {
		if c.Name == web.CookieName || c.Name == web.SecureCookieName {
			return c
		}
	}
	t.Fatalf("no %s cookie in %q", web.CookieName, resp.Header.Values("Set-Cookie"))
	return nil
}

// A token pasted once becomes an HttpOnly, SameSite=Strict cookie
// (Secure over TLS); the join token and unknown tokens do not log in.
func TestLogin(t *testing.T) {
	srv, page, _ := schedd(t)
	_, secret := token(t, srv, 1000, "alice")
	c := newClient(t, page)
	if code, _, body := c.do("GET", "/session", "", nil); code != 200 || !strings.Contains(body, `"user":""`) {
		t.Errorf("GET /session before logging in: %d %s", code, body)
	}
	code, resp, s := c.login(secret)
	if code != 200 || s.User != "alice" || s.UID != 1000 || len(s.CSRF) < 32 {
		t.Fatalf("login: %d %+v", code, s)
	}
	ck := sessionCookie(t, resp)
	if ck.Name != web.CookieName || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.Domain != "" || ck.Secure {
		t.Errorf("session cookie over plain HTTP: %q; want %s, HttpOnly, SameSite=Strict, Path=/, no Domain, not Secure", resp.Header.Get("Set-Cookie"), web.CookieName)
	}
	if strings.Contains(resp.Header.Get("Set-Cookie"), secret) || len(ck.Value) < 32 {
		t.Errorf("the cookie %q is the token or too short", ck.Value)
	}
	code, _, body := c.do("GET", "/session", "", nil)
	if code != 200 || !strings.Contains(body, `"user":"alice"`) || !strings.Contains(body, s.CSRF) {
		t.Errorf("GET /session: %d %s", code, body)
	}

	for name, tc := range map[string]struct {
		secret string
		code   int
		want   string
	}{
		"unknown": {"trp_nope", 401, "unknown or revoked"},
		"join":    {joinToken, 403, "cannot log in"},
		"empty":   {" ", 400, "token is empty"},
	} {
		o := newClient(t, page)
		code, resp, _ := o.login(tc.secret)
		if code != tc.code || o.cookie != "" {
			t.Errorf("%s token: %d, cookie %q; want %d and none", name, code, resp.Header.Get("Set-Cookie"), tc.code)
		}
	}
	// Another site's page cannot log the browser in (login CSRF).
	o := newClient(t, page)
	o.origin = "http://evil.example"
	if code, _, body := o.login(secret); code != 403 || o.cookie != "" {
		t.Errorf("login from another origin: %d %+v", code, body)
	}
	// A form cannot post JSON without asking first.
	if code, _, body := c.do("POST", "/login", "token="+secret, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}); code != 415 {
		t.Errorf("login as a form: %d %s", code, body)
	}

	// Logging out ends the session on the server, not only in the browser.
	old := c.cookie
	if code, _, body := c.do("POST", "/logout", "", nil); code != 200 {
		t.Fatalf("logout: %d %s", code, body)
	}
	c.cookie = old
	if _, _, body := c.do("GET", "/session", "", nil); !strings.Contains(body, `"user":""`) {
		t.Errorf("the cookie still works after logging out: %s", body)
	}
}

func TestLoginOverTLSIsSecure(t *testing.T) {
	srv, _, _ := schedd(t)
	_, secret := token(t, srv, 1000, "alice")
	ts := httptest.NewTLSServer(web.Handler(srv, web.Output{}))
	defer ts.Close()
	c := newClient(t, ts.URL)
	c.hc = ts.Client()
	code, resp, _ := c.login(secret)
	if ck := sessionCookie(t, resp); code != 200 || ck.Name != web.SecureCookieName || !ck.Secure || !ck.HttpOnly ||
		ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.Domain != "" {
		t.Errorf("login over TLS: %d, cookie %q; want %s, Secure, HttpOnly, SameSite=Strict, Path=/, no Domain", code, resp.Header.Get("Set-Cookie"), web.SecureCookieName)
	}
	if _, _, body := c.do("GET", "/session", "", nil); !strings.Contains(body, `"user":"alice"`) {
		t.Errorf("GET /session over TLS with the __Host- cookie: %s", body)
	}
	// Over TLS the page reads the __Host- cookie only: a plain one of
	// the same value, which a sibling host could have set with a Domain
	// attribute, is no session.
	c.name = web.CookieName
	if _, _, body := c.do("GET", "/session", "", nil); !strings.Contains(body, `"user":""`) {
		t.Errorf("GET /session over TLS with a plain %s cookie: %s, want no session", web.CookieName, body)
	}
}

// A session acts as its token's owner through the /v1 API: on its own
// jobs only, with the CSRF header, from the page's origin.
func TestSessionControlsOwnJobsOnly(t *testing.T) {
	srv, page, _ := schedd(t)
	_, aliceTok := token(t, srv, 1000, "alice")
	_, bobTok := token(t, srv, 1001, "bob")
	job := submit(t, srv, 1000, "alices", 1, 1)
	path := "/v1/jobs/" + strconv.FormatUint(job, 10)
	alice, bob := newClient(t, page), newClient(t, page)
	alice.login(aliceTok)
	bob.login(bobTok)

	// Reads: the owner sees the job in full, others redacted.
	if _, _, body := alice.do("GET", path, "", nil); !strings.Contains(body, "secret-command") {
		t.Errorf("alice's session does not see her own job in full: %s", body)
	}
	if _, _, body := bob.do("GET", path, "", nil); strings.Contains(body, "secret-command") || !strings.Contains(body, "alices") {
		t.Errorf("bob's session sees alice's job: %s", body)
	}
	// Bob may not touch it, whatever he sends.
	for _, what := range []string{"kill", "hold", "release"} {
		code, _, body := bob.do("POST", path+"/"+what, "", nil)
		if code != 403 || !strings.Contains(body, "permission denied") {
			t.Errorf("bob's %s of alice's job: %d %s; want 403", what, code, body)
		}
	}
	// Alice's writes need the CSRF header and her page's origin.
	for name, hdr := range map[string]map[string]string{
		"no CSRF header":    {web.CSRFHeader: ""},
		"wrong CSRF header": {web.CSRFHeader: strings.Repeat("0", 64)},
		"bob's CSRF header": {web.CSRFHeader: bob.csrf},
		"another origin":    {"Origin": "http://evil.example"},
	} {
		if code, _, body := alice.do("POST", path+"/kill", "", hdr); code != 403 {
			t.Errorf("kill with %s: %d %s; want 403", name, code, body)
		}
	}
	if j := srv.Store().Snapshot().Job(job); j.KillWanted || j.State != api.JobPending {
		t.Fatalf("the refused requests touched the job: %s kill_wanted=%v", j.State, j.KillWanted)
	}
	// Her own: hold, release, kill.
	for _, step := range []struct {
		what string
		want api.JobState
	}{{"hold", api.JobHeld}, {"release", api.JobPending}, {"kill", api.JobCancelled}} {
		code, _, body := alice.do("POST", path+"/"+step.what, "", nil)
		if code != 200 {
			t.Fatalf("alice's %s: %d %s", step.what, code, body)
		}
		if j := srv.Store().Snapshot().Job(job); j.State != step.want {
			t.Fatalf("after %s the job is %s, want %s", step.what, j.State, step.want)
		}
	}
	// Only the page's endpoints pass, session or not.
	for _, r := range []struct{ method, path string }{{"GET", "/v1/tokens"}, {"POST", "/v1/tokens"}, {"GET", "/v1/snapshot"}, {"POST", "/v1/reconfig"}, {"POST", "/v1/nodes/drain"}} {
		if code, _, body := alice.do(r.method, r.path, "{}", nil); code != 404 {
			t.Errorf("%s %s with a session: %d %s; want 404", r.method, r.path, code, body)
		}
	}
}

// The API itself, with bearer tokens as the CLI sends them: bob's token
// neither kills nor attaches to alice's job.
func TestOtherUsersTokenCannotKillOrAttach(t *testing.T) {
	srv, _, _ := schedd(t)
	_, bobTok := token(t, srv, 1001, "bob")
	job := submit(t, srv, 1000, "alices", 1, 1)
	ts := httptest.NewServer(srv.TCPHandler(false))
	defer ts.Close()
	for _, c := range []struct {
		path string
		hdr  map[string]string
	}{
		{"/kill", nil},
		{"/attach", map[string]string{"Upgrade": attach.Upgrade, "Connection": "Upgrade"}},
	} {
		req, _ := http.NewRequest("POST", ts.URL+"/v1/jobs/"+strconv.FormatUint(job, 10)+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+bobTok)
		for k, v := range c.hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || !strings.Contains(string(b), "permission denied") {
			t.Errorf("POST %s with bob's token on alice's job: %d %s; want 403", c.path, resp.StatusCode, b)
		}
	}
	if j := srv.Store().Snapshot().Job(job); j.KillWanted || j.State != api.JobPending {
		t.Errorf("bob's token touched alice's job: %s", j.State)
	}
}

// Revoking the token ends its sessions at once.
func TestRevokedTokenEndsSession(t *testing.T) {
	srv, page, _ := schedd(t)
	tid, secret := token(t, srv, 1000, "alice")
	job := submit(t, srv, 1000, "alices", 1, 1)
	c := newClient(t, page)
	if code, _, _ := c.login(secret); code != 200 {
		t.Fatal("login failed")
	}
	if err := srv.RevokeToken(context.Background(), tid); err != nil {
		t.Fatal(err)
	}
	if code, _, body := c.do("POST", "/v1/jobs/"+strconv.FormatUint(job, 10)+"/kill", "", nil); code != 405 {
		t.Errorf("kill after the token was revoked: %d %s; want the anonymous 405", code, body)
	}
	if _, _, body := c.do("GET", "/session", "", nil); !strings.Contains(body, `"user":""`) {
		t.Errorf("GET /session after revoking: %s", body)
	}
	if j := srv.Store().Snapshot().Job(job); j.KillWanted {
		t.Errorf("a revoked token's session killed the job")
	}
}

// The page submits a job file as bsub does: parsed on the server,
// submitted as the session's user from their home directory.
func TestSubmitFromPage(t *testing.T) {
	srv, page, _ := schedd(t)
	me, err := user.Current()
	if err != nil || me.HomeDir == "" {
		t.Skipf("SKIP: this process's user has no home directory (%v): the page submits from there", err)
	}
	uid := os.Getuid()
	_, secret := token(t, srv, uid, me.Username)
	c := newClient(t, page)
	c.login(secret)
	src := `job "from-page" {
  image   = "host"
  command = ["sh", "-c", "hostname"]
  resources {
    cpu    = 1
    memory = "256MiB"
  }
}
`
	body, _ := json.Marshal(web.Submit{Name: "hello.hcl", Source: src})
	code, _, out := c.do("POST", "/submit", string(body), nil)
	var res api.SubmitResponse
	if code != 201 || json.Unmarshal([]byte(out), &res) != nil || res.JobID == 0 {
		t.Fatalf("POST /submit: %d %s", code, out)
	}
	j := srv.Store().Snapshot().Job(res.JobID)
	if j == nil || j.Name != "from-page" || j.UID != uid || j.User != me.Username || j.Cwd != me.HomeDir || j.Interactive {
		t.Fatalf("submitted job: %+v", j)
	}

	// An interactive job without a command gets a shell, as bsub -I.
	body, _ = json.Marshal(web.Submit{Name: "sh.hcl", Source: `job "sh" {
  image = "host"
}
`, Interactive: true})
	code, _, out = c.do("POST", "/submit", string(body), nil)
	if code != 201 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("interactive POST /submit: %d %s", code, out)
	}
	if j := srv.Store().Snapshot().Job(res.JobID); !j.Interactive || strings.Join(j.Containers[0].Command, " ") != "/bin/sh" {
		t.Errorf("interactive job: interactive=%v command %q", j.Interactive, j.Containers[0].Command)
	}

	// Errors name the file, line and column.
	body, _ = json.Marshal(web.Submit{Name: "bad.hcl", Source: "job \"x\" {\n  image = \"host\"\n  colour = 3\n}\n"})
	if code, _, out := c.do("POST", "/submit", string(body), nil); code != 400 || !strings.Contains(out, "bad.hcl:3:3: Unsupported argument") {
		t.Errorf("a bad job file: %d %s; want 400 naming bad.hcl:3", code, out)
	}
	// The body names no user: a uid sent along is refused, not used.
	if code, _, out := c.do("POST", "/submit", `{"name":"x.hcl","source":"job \"x\" {}","uid":0}`, nil); code != 400 || !strings.Contains(out, "uid") {
		t.Errorf("a submission naming a uid: %d %s", code, out)
	}
	// Without a session, or without the CSRF header, nothing is submitted.
	before := len(srv.Store().Snapshot().Jobs())
	if code, _, _ := newClient(t, page).do("POST", "/submit", string(body), nil); code != 401 {
		t.Errorf("anonymous POST /submit: %d, want 401", code)
	}
	if code, _, _ := c.do("POST", "/submit", string(body), map[string]string{web.CSRFHeader: ""}); code != 403 {
		t.Errorf("POST /submit without the CSRF header: %d, want 403", code)
	}
	if n := len(srv.Store().Snapshot().Jobs()); n != before {
		t.Errorf("%d jobs after refused submissions, want %d", n, before)
	}
}

// TestSubmitFromPageRefusalPlaced: a job file the page parses but schedd
// refuses (sched/admission, the path bsub's submit and dry run take)
// comes back in the same words as the API's submit of the same file,
// each problem placed at its file:line:col.
func TestSubmitFromPageRefusalPlaced(t *testing.T) {
	srv, page, _ := schedd(t)
	me, err := user.Current()
	if err != nil || me.HomeDir == "" {
		t.Skipf("SKIP: this process's user has no home directory (%v): the page submits from there", err)
	}
	uid := os.Getuid()
	_, secret := token(t, srv, uid, me.Username)
	c := newClient(t, page)
	c.login(secret)
	src := `job "elsewhere" {
  partition = "nope"
  image     = "host"
  command   = ["true"]
}
`
	body, _ := json.Marshal(web.Submit{Name: "where.hcl", Source: src})
	code, _, out := c.do("POST", "/submit", string(body), nil)
	var got api.Error
	if err := json.Unmarshal([]byte(out), &got); code != 400 || err != nil {
		t.Fatalf("POST /submit: %d %s", code, out)
	}
	_, want := srv.Submit(context.Background(), api.SubmitRequest{JobFile: src, Source: "where.hcl", Cwd: me.HomeDir,
		User: me.Username, UID: uid, GID: os.Getgid()})
	if want == nil || got.Error != want.Error() {
		t.Fatalf("the page says %q\nsubmit says %v", got.Error, want)
	}
	placed := api.Problem{Path: "partition", Position: "where.hcl:2:15", Message: `partition "nope" does not exist; known partitions: default`}
	if len(got.Problems) != 1 || got.Problems[0] != placed || got.Error != "invalid request: "+placed.String() {
		t.Errorf("the page's refusal: %+v\nwant %+v", got, placed)
	}
	if n := len(srv.Store().Snapshot().Jobs()); n != 0 {
		t.Errorf("%d jobs stored by refused submissions", n)
	}
}

// The terminal's WebSocket: a session, this page's Origin, and the
// job's owner; a refusal after the handshake comes as an 'e' frame.
func TestTerminalRefusals(t *testing.T) {
	srv, page, _ := schedd(t)
	_, aliceTok := token(t, srv, 1000, "alice")
	_, bobTok := token(t, srv, 1001, "bob")
	job := submit(t, srv, 1000, "alices", 1, 1)
	path := "/v1/jobs/" + strconv.FormatUint(job, 10) + "/terminal"
	alice, bob := newClient(t, page), newClient(t, page)
	alice.login(aliceTok)
	bob.login(bobTok)

	// Before the handshake: plain HTTP answers.
	if code, _, _ := newClient(t, page).do("GET", path, "", nil); code != 401 {
		t.Errorf("anonymous terminal: %d, want 401", code)
	}
	if code, _, body := alice.do("GET", path, "", map[string]string{"Origin": "http://evil.example"}); code != 403 {
		t.Errorf("terminal from another origin: %d %s, want 403", code, body)
	}
	if code, _, body := alice.do("GET", path, "", nil); code != 403 || !strings.Contains(body, "Origin") {
		t.Errorf("terminal without an Origin: %d %s, want 403", code, body)
	}

	dial := func(c *client) string {
		t.Helper()
		cfg, err := websocket.NewConfig("ws"+strings.TrimPrefix(page, "http")+path+"?host=main1", page)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Header = http.Header{"Cookie": {c.name + "=" + c.cookie}}
		ws, err := websocket.DialConfig(cfg)
		if err != nil {
			t.Fatalf("WebSocket handshake: %v", err)
		}
		defer ws.Close()
		var msg []byte
		if err := websocket.Message.Receive(ws, &msg); err != nil {
			t.Fatalf("reading the first frame: %v", err)
		}
		f, err := attach.NewReader(strings.NewReader(string(msg))).Next()
		if err != nil || f.Type != attach.Error {
			t.Fatalf("first frame %q (%v), want an error frame", msg, err)
		}
		return string(f.Payload)
	}
	if msg := dial(bob); !strings.Contains(msg, "permission denied") || !strings.Contains(msg, "only to your own jobs") {
		t.Errorf("bob's terminal on alice's job: %q", msg)
	}
	if msg := dial(alice); !strings.Contains(msg, "not interactive") {
		t.Errorf("alice's terminal on her batch job: %q", msg)
	}
}

// A job's output needs a session, and a schedd that has bpeek.
func TestOutputRefusals(t *testing.T) {
	srv, page, _ := schedd(t)
	_, secret := token(t, srv, 1000, "alice")
	job := submit(t, srv, 1000, "alices", 1, 1)
	path := "/v1/jobs/" + strconv.FormatUint(job, 10) + "/output"
	if code, _, body := newClient(t, page).do("GET", path, "", nil); code != 401 {
		t.Errorf("anonymous output: %d %s, want 401", code, body)
	}
	c := newClient(t, page)
	c.login(secret)
	if code, _, body := c.do("GET", path, "", nil); code != 501 || !strings.Contains(body, "bpeek") {
		t.Errorf("output without bpeek: %d %s, want 501", code, body)
	}
	if code, _, body := c.do("POST", path, "", nil); code != 405 {
		t.Errorf("POST output: %d %s, want 405", code, body)
	}
}

// Serve speaks TLS when given a certificate (schedd --web-tls).
func TestServeTLS(t *testing.T) {
	srv, _, _ := schedd(t)
	cert, key, err := auth.SelfSigned(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := web.Serve(ctx, "127.0.0.1:0", cert, key, web.Handler(srv, web.Output{}), nil, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Get("https://" + addr.String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		t.Errorf("GET / over TLS: %d", resp.StatusCode)
	}
	if resp, err := http.Get("http://" + addr.String() + "/"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("the TLS listener answered plain HTTP")
		}
	}
}
