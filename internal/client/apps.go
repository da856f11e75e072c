package client

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
)

// AppTransport is an http.RoundTripper for schedd's /apps/ paths (a
// local forwarder such as bapp): it sends each request to the address
// the client uses (the leader once a redirect named it), with the bearer
// token under the same rules as every call, and returns schedd's answer
// as it is, 101 Switching Protocols included. It never retries: an
// app's requests are the app's to repeat. A follower's redirect to the
// leader (one of the peers the client was given) is followed for a
// request without a body; any other redirect is the app's and goes back
// as it is.
func (c *sessionCalls) AppTransport() http.RoundTripper { return appTransport{c.conn} }

type appTransport struct{ c *conn }

func (t appTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := t.c
	base := c.bases[int(c.cur.Load())%len(c.bases)]
	if l := c.leader.Load(); l != nil {
		base = *l
	}
	for hop := 0; ; hop++ {
		b, err := url.Parse(base)
		if err != nil {
			return nil, err
		}
		out := req.Clone(req.Context())
		// The Host the browser named goes on to the app (schedd passes
		// it), which compares it with the Origin of its pages' requests
		// (Jupyter's WebSocket check does).
		out.URL.Scheme, out.URL.Host = b.Scheme, b.Host
		out.Header.Del("Authorization")
		if tok := *c.token.Load(); tok != "" && b.Host != "schedd" {
			if b.Scheme == "http" && !loopback(b.Hostname()) {
				return nil, fmt.Errorf("%w to %s: use https:// (schedd --tls-cert) or a unix socket", ErrPlainToken, b.Host)
			}
			out.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := c.http.Transport.RoundTrip(out)
		if err != nil {
			return nil, fmt.Errorf("%w at %s: %v", ErrUnreachable, c.where(base), unwrapDial(err))
		}
		redirect := resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusPermanentRedirect
		if !redirect || hop >= 3 || (req.Body != nil && req.Body != http.NoBody) {
			return resp, nil
		}
		loc, err := resp.Location()
		if err != nil || loc.Host == "" {
			return resp, nil // the app's own redirect, or one to pass on
		}
		next := loc.Scheme + "://" + loc.Host
		if loc.Path != req.URL.Path || !slices.Contains(c.bases, next) {
			// Not schedd's to its leader (that keeps the path, to a
			// peer the client was given): the app's, passed on, and
			// never with the token.
			return resp, nil
		}
		resp.Body.Close()
		base = next
		c.leader.Store(&base)
	}
}
