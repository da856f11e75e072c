// Command bapp forwards a local port to one of a job's services (its
// service blocks; schedd's /apps/JOB/SERVICE/), as Backend.AI's `app`
// command and kubectl port-forward do: a browser on this machine opens
// the link bapp prints and reaches the app with the user's credentials,
// which bapp adds. Each bapp listens on a port of its own, so each app
// has an origin of its own in the browser; a key in the link (then a
// cookie) keeps other users of this machine out.
package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
)

const prog = "bapp"

var command = cli.Command{
	Name:     prog,
	Synopsis: "JOBID SERVICE",
	Summary: "Forward a local port to job JOBID's service SERVICE (a service block of its job\n" +
		"file) through schedd, and print the link a browser on this machine opens it\n" +
		"with. Runs until interrupted; only the job's owner gets through.",
	Examples: []string{
		"bapp 42 jupyter",
		"bapp --listen 127.0.0.1:8888 42 jupyter",
	},
}

// keyParam carries the key in the link bapp prints; the cookie it
// becomes is named keyCookie plus the port (cookies do not tell ports
// apart, origins do).
const (
	keyParam  = "troupe-key"
	keyCookie = "troupe-key-"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	listen := fs.String("listen", "127.0.0.1:0", "listen on `address` (host:port; port 0: any free one)")
	pos, err := fs.Parse(args)
	if err != nil {
		return fs.Exit(err)
	}
	if len(pos) != 2 {
		return fs.UsageError("want a job id and a service name")
	}
	id, err := cli.ParseJobID(pos[0])
	if err != nil {
		return fs.UsageError("%v", err)
	}
	service := pos[1]
	c, err := fs.Client()
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	j, _, err := c.Job(ctx, id, 0, 0)
	switch {
	case client.IsNotFound(err):
		return cli.Fail(stderr, prog, fmt.Errorf("job %d: not found", id))
	case err != nil:
		return cli.Fail(stderr, prog, err)
	case j.Spec.Service(service) == nil:
		var names []string
		for _, s := range j.Spec.Services {
			names = append(names, s.Name)
		}
		if len(names) == 0 {
			return cli.Fail(stderr, prog, fmt.Errorf("job %d declares no service %q (it declares none, or is not yours)", id, service))
		}
		return cli.Fail(stderr, prog, fmt.Errorf("job %d declares no service %q; it declares %s", id, service, strings.Join(names, ", ")))
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return cli.Fail(stderr, prog, fmt.Errorf("--listen %s: %w", *listen, err))
	}
	f := newForwarder(c.AppTransport(), id, service, ln.Addr().(*net.TCPAddr).Port)
	hs := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(stderr, prog+": ", 0)}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	fmt.Fprintf(stdout, "http://%s%s/?%s=%s\n", hostPort(ln.Addr()), f.prefix, keyParam, f.key)
	fmt.Fprintf(stderr, "%s: forwarding %s to job %d's service %s; open the link above in a browser on this machine; Ctrl-C stops\n", prog, ln.Addr(), id, service)
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return cli.Fail(stderr, prog, err)
	}
	return cli.ExitOK
}

// hostPort writes a listener's address for a link: 127.0.0.1:PORT, or
// localhost's for an unspecified address.
func hostPort(a net.Addr) string {
	ta := a.(*net.TCPAddr)
	if ta.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(ta.Port))
	}
	return ta.String()
}

// forwarder serves one service on its local port: a request with the
// key (in the link, then in the cookie) goes to schedd under the same
// path; anything else is refused here.
type forwarder struct {
	prefix string // /apps/JOB/SERVICE
	key    string
	cookie string // keyCookie + port
	proxy  *httputil.ReverseProxy
}

func newForwarder(rt http.RoundTripper, job uint64, service string, port int) *forwarder {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	f := &forwarder{prefix: "/apps/" + strconv.FormatUint(job, 10) + "/" + service, key: hex.EncodeToString(b), cookie: keyCookie + strconv.Itoa(port)}
	f.proxy = &httputil.ReverseProxy{
		Transport: rt,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "schedd" // AppTransport sets both
			setCookies(pr.Out.Header, f.cookie)
		},
		ModifyResponse: func(res *http.Response) error {
			var keep []string
			for _, v := range res.Header.Values("Set-Cookie") {
				if n, _, _ := strings.Cut(v, "="); strings.TrimSpace(n) != f.cookie {
					keep = append(keep, v)
				}
			}
			res.Header.Del("Set-Cookie")
			for _, v := range keep {
				res.Header.Add("Set-Cookie", v)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, prog+": "+err.Error(), http.StatusBadGateway)
		},
	}
	return f
}

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A name that is not an address could be another site's, rebound
	// to this machine (DNS rebinding): only addresses and localhost.
	if h, _, err := net.SplitHostPort(r.Host); err != nil || (net.ParseIP(h) == nil && h != "localhost") {
		http.Error(w, prog+": open the link bapp printed (by address, not "+r.Host+")", http.StatusForbidden)
		return
	}
	// Another site's page (or another app's port) may not use the key
	// the browser holds: browsers name the page that sent a request.
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		http.Error(w, prog+": requests from "+o+" are refused", http.StatusForbidden)
		return
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		http.Error(w, prog+": requests from other sites are refused", http.StatusForbidden)
		return
	}
	q := r.URL.Query()
	if k := q.Get(keyParam); k != "" {
		if !f.keyOK(k) {
			http.Error(w, prog+": wrong key; open the link bapp printed", http.StatusUnauthorized)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: f.cookie, Value: f.key, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		q.Del(keyParam)
		to := r.URL.EscapedPath()
		if len(q) > 0 {
			to += "?" + q.Encode()
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
		return
	}
	if c, err := r.Cookie(f.cookie); err != nil || !f.keyOK(c.Value) {
		http.Error(w, prog+": open the link bapp printed (it holds the key)", http.StatusUnauthorized)
		return
	}
	if r.URL.Path != f.prefix && !strings.HasPrefix(r.URL.Path, f.prefix+"/") {
		http.Redirect(w, r, f.prefix+"/", http.StatusFound)
		return
	}
	f.proxy.ServeHTTP(w, r)
}

func (f *forwarder) keyOK(k string) bool {
	return subtle.ConstantTimeCompare([]byte(k), []byte(f.key)) == 1
}

// setCookies drops cookie name from h's Cookie headers, keeping the
// others byte for byte: the key is bapp's, never the app's.
func setCookies(h http.Header, name string) {
	var out []string
	for _, v := range h.Values("Cookie") {
		var keep []string
		for _, part := range strings.Split(v, ";") {
			part = strings.TrimSpace(part)
			if n, _, _ := strings.Cut(part, "="); n != name && part != "" {
				keep = append(keep, part)
			}
		}
		if len(keep) > 0 {
			out = append(out, strings.Join(keep, "; "))
		}
	}
	h.Del("Cookie")
	if len(out) > 0 {
		h["Cookie"] = out
	}
}
