// Command bapp forwards a local port to one of a job's services (its
// service blocks; schedd's /apps/JOB/SERVICE/), as Backend.AI's `app`
// command and kubectl port-forward do: a browser on this machine opens
// the link bapp prints and reaches the app with the user's credentials,
// which bapp adds.
//
// Browsers keep cookies by host name, not by port: every page of
// 127.0.0.1 (any user's app, the web page of schedd --web-addr) would
// get the others' cookies. So each bapp serves its app under a host name
// of its own, RANDOM.localhost (browsers resolve *.localhost to the
// loopback themselves), and answers no other: the browser gives the
// app's pages only the app's cookies and bapp's key, and keeps them
// from every other page. bapp also passes no cookie of troupe's own to
// the app and lets the app set none for another host (see cookies.go).
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
// becomes is named keyCookie plus the port. hostSuffix ends the host
// name each bapp serves its app under: one label before it, so that no
// page can set a cookie for every app's host (browsers refuse a cookie
// for the whole of localhost, as for a top-level domain).
const (
	keyParam   = "troupe-key"
	keyCookie  = "troupe-key-"
	hostSuffix = ".localhost"
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
	port := ln.Addr().(*net.TCPAddr).Port
	f := newForwarder(c.AppTransport(), id, service, port)
	hs := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(stderr, prog+": ", 0)}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	fmt.Fprintln(stdout, f.link(port))
	fmt.Fprintf(stderr, "%s: forwarding %s to job %d's service %s; open the link above in a browser on this machine; Ctrl-C stops\n", prog, ln.Addr(), id, service)
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return cli.Fail(stderr, prog, err)
	}
	return cli.ExitOK
}

// forwarder serves one service on its local port, under its own host
// name: a request with the key (in the link, then in the cookie) goes to
// schedd under the same path; anything else is refused here.
type forwarder struct {
	prefix string // /apps/JOB/SERVICE
	host   string // RANDOM.localhost, the app's own
	key    string
	cookie string // keyCookie + port
	proxy  *httputil.ReverseProxy
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

func newForwarder(rt http.RoundTripper, job uint64, service string, port int) *forwarder {
	// The host name is as hard to guess as the key: a page of another
	// port opened under this name would get the app's cookies.
	f := &forwarder{prefix: "/apps/" + strconv.FormatUint(job, 10) + "/" + service, host: "bapp-" + randomHex(16) + hostSuffix,
		key: randomHex(32), cookie: keyCookie + strconv.Itoa(port)}
	f.proxy = &httputil.ReverseProxy{
		Transport: rt,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "schedd" // AppTransport sets both
			appCookies(pr.Out.Header)
		},
		ModifyResponse: func(res *http.Response) error {
			appSetCookies(res.Header)
			// The app's links to other sites do not name its host.
			res.Header.Set("Referrer-Policy", "same-origin")
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, prog+": "+err.Error(), http.StatusBadGateway)
		},
	}
	return f
}

// link is the address bapp prints: the app's host name, the port the
// browser reaches bapp on, the key.
func (f *forwarder) link(port int) string {
	return "http://" + net.JoinHostPort(f.host, strconv.Itoa(port)) + f.prefix + "/?" + keyParam + "=" + f.key
}

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Only the app's own host name, on any port (an ssh tunnel may
	// forward another): under 127.0.0.1 or localhost the browser would
	// mix the app's cookies with every other page's of that name, and
	// a name of another site could be one rebound to this machine (DNS
	// rebinding). The answer does not say the name.
	h, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		h = r.Host // port 80
	}
	if !strings.EqualFold(h, f.host) {
		http.Error(w, prog+": open the link bapp printed (this is not the host name it names)", http.StatusForbidden)
		return
	}
	// Another site's page (or another app's) may not use the key the
	// browser holds: browsers name the page that sent a request.
	if o := r.Header.Get("Origin"); o != "" && !strings.EqualFold(o, "http://"+r.Host) {
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
