package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/backoff"
)

// call is one request as roundTrip sends it, on every try alike.
type call struct {
	method, target string
	body           []byte
	// bodyFn, instead of body, gives the body of each request sent (a
	// file streamed, not held in memory: RestoreSnapshot).
	bodyFn func() (io.Reader, error)
	ctype  string
	header http.Header
	// wait is how long schedd may hold the answer back (a blocking
	// query's wait, an attach's pairing): it extends the try's deadline
	// and the call's overall limit.
	wait time.Duration
	// requestID is the write's id, the same on every try (one is made
	// when empty).
	requestID string
	// floor: the answer must reflect at least this state index (the
	// client's last write); an older one is ErrBehind (readFloor).
	floor uint64
}

func (k call) write() bool { return k.method != http.MethodGet && k.method != http.MethodHead }

// tryResult is what one try (one address, its redirects followed) gave.
type tryResult struct {
	resp *http.Response
	err  error  // a transport error (resp nil)
	at   string // the address the last hop went to, for messages
	base string // scheme://host of the last hop
	hops int    // redirects followed
	// sent: the request may have reached schedd (the error came after
	// the connection was made).
	sent bool
}

// roundTrip sends one request until it gets an answer that settles it:
// a 2xx (returned open), or a refusal (an *APIError). It follows
// redirects to the leader and, within the overall limit, goes on to the
// next address on connection errors, timeouts and 503s; a write whose
// outcome is open (504 with OutcomeUnknown, or a connection lost after
// the request was sent) is sent again with the same request id, with one
// address too. What is still open at the limit is ErrUnknownOutcome.
func (c *conn) roundTrip(ctx context.Context, k call) (*http.Response, error) {
	if k.write() && k.requestID == "" {
		k.requestID = auth.NewID() + auth.NewID()
	}
	k = c.readFloor(k)
	limit := c.Timeout() + k.wait
	deadline := time.Now().Add(limit)
	n := len(c.bases)
	start := int(c.cur.Load())
	var (
		lastErr error
		open    error // why the outcome is open, once it is
		tries   int
	)
	for attempt := 0; ; attempt++ {
		i := (start + attempt) % n
		base := c.bases[i]
		viaLeader := false
		if l := c.leader.Load(); l != nil && attempt == 0 {
			base, viaLeader = *l, true
		}
		if tries > 0 && k.write() && open != nil {
			c.notify(fmt.Sprintf("%v; sending it again with the same request id (%s) to %s", open, k.requestID, hostOf(base)))
		}
		tries++
		r := c.try(ctx, base, k)
		retry := false
		switch {
		case r.err != nil:
			if ctx.Err() != nil {
				if k.write() && (open != nil || r.sent) {
					return nil, fmt.Errorf("%w: interrupted before schedd answered (request id %s): %w", ErrUnknownOutcome, k.requestID, ctx.Err())
				}
				return nil, ctx.Err()
			}
			if viaLeader {
				c.leader.Store(nil)
			}
			lastErr = c.unreachable(r)
			if permanent(r.err) {
				return nil, lastErr
			}
			if r.sent && k.write() {
				open = fmt.Errorf("the connection to %s was lost after the request was sent", r.at)
			}
			// A dead address (refused at once) with no other to try
			// fails fast, unless an earlier try may have been applied.
			retry = n > 1 || r.sent || open != nil || viaLeader
		case foreign(r.resp):
			r.resp.Body.Close()
			return nil, fmt.Errorf("%w at %s: it answered %s with a web page (%s); check --addr or $%s",
				ErrNotSchedd, r.at, r.resp.Status, r.resp.Header.Get("Content-Type"), EnvAddr)
		case behind(r.resp, k.floor):
			// A follower that has not applied our last write: its
			// answer (a 404 too) is of an older state. Ask the next.
			lastErr = fmt.Errorf("%w: %s answered from state index %s, before this client's last write (index %d)",
				ErrBehind, r.at, r.resp.Header.Get(api.IndexHeader), k.floor)
			drainClose(r.resp)
			if viaLeader {
				c.leader.Store(nil)
			}
			retry = true
		case r.resp.StatusCode/100 == 2 || r.resp.StatusCode == http.StatusSwitchingProtocols:
			if k.write() {
				idx, _ := strconv.ParseUint(r.resp.Header.Get(api.IndexHeader), 10, 64)
				c.SawWrite(idx)
			}
			if r.hops > 0 {
				c.leader.Store(&r.base)
			} else if !viaLeader {
				c.cur.Store(int32(i))
			}
			return r.resp, nil
		default:
			ae := apiError(r.resp)
			lastErr = ae
			switch {
			case ae.Outcome == api.OutcomeUnknown && k.write():
				open = fmt.Errorf("schedd at %s could not tell whether it applied the request (%s)", r.at, ae.Message)
				retry = true
			case r.resp.StatusCode == http.StatusServiceUnavailable:
				// Not applied: no leader right now (an election).
				retry = n > 1 || r.resp.Header.Get("Retry-After") != "" || open != nil
				if viaLeader {
					c.leader.Store(nil)
					retry = true
				}
			}
		}
		if !retry {
			return nil, lastErr
		}
		if time.Now().After(deadline) {
			return nil, c.gaveUp(k, limit, tries, open, lastErr)
		}
		if (attempt+1)%n == 0 || n == 1 {
			if err := backoff.Sleep(ctx, retryPause); err != nil {
				if k.write() && open != nil {
					return nil, fmt.Errorf("%w: interrupted (request id %s): %w", ErrUnknownOutcome, k.requestID, err)
				}
				return nil, err
			}
		}
	}
}

// catchUpWait is how long a read carrying the client's last write
// (readFloor) lets a peer wait to apply it before answering; a peer
// still behind then is left for the next one.
var catchUpWait = 2 * time.Second

// readFloor makes k, a read of the state, wait for the client's last
// write: its blocking index is raised to just before that write's index
// (schedd answers once its state passes the index asked for), with a
// short wait when the caller gave none, and the answer must carry that
// index or a later one (behind). Other calls go as they are.
func (c *conn) readFloor(k call) call {
	w := c.written.Load()
	if w == 0 || k.write() || !stateRead(k.target) {
		return k
	}
	path, raw, _ := strings.Cut(k.target, "?")
	q, err := url.ParseQuery(raw)
	if err != nil {
		return k
	}
	if idx, _ := strconv.ParseUint(q.Get("index"), 10, 64); idx < w-1 {
		q.Set("index", strconv.FormatUint(w-1, 10))
		if k.wait == 0 {
			q.Set("wait", catchUpWait.String())
			k.wait = catchUpWait
		}
	}
	k.target = path
	if enc := q.Encode(); enc != "" {
		k.target += "?" + enc
	}
	k.floor = w
	return k
}

// stateRead reports whether a GET of target answers the replicated state
// at a state index (api.IndexHeader) a blocking query waits on: the job
// list, one job, the history, the nodes, the partitions, the fair
// share. A node's assignments wait on that node's own index instead,
// and the rest carry none.
func stateRead(target string) bool {
	path, _, _ := strings.Cut(target, "?")
	switch path {
	case "/v1/jobs", "/v1/history", "/v1/nodes", "/v1/partitions", "/v1/fairshare":
		return true
	}
	id, ok := strings.CutPrefix(path, "/v1/jobs/")
	return ok && id != "" && !strings.Contains(id, "/")
}

// behind reports whether resp, the answer to a read that must reflect
// state index floor, comes from an older state. An answer carrying no
// index (an older schedd's refusal) is taken as it is.
func behind(resp *http.Response, floor uint64) bool {
	if floor == 0 || (resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusNotFound) {
		return false
	}
	idx, err := strconv.ParseUint(resp.Header.Get(api.IndexHeader), 10, 64)
	return err == nil && idx < floor
}

// gaveUp is the error of a call whose overall limit passed.
func (c *conn) gaveUp(k call, limit time.Duration, tries int, open, last error) error {
	if k.write() && open != nil {
		return &UnknownOutcomeError{RequestID: k.requestID, Tries: tries, Limit: limit, Cause: open, Last: last}
	}
	if errors.Is(last, ErrUnreachable) {
		return fmt.Errorf("%w (gave up after %d tries in %s)", last, tries, limit)
	}
	return fmt.Errorf("%w: no answer within %s (%d tries): %w", ErrTimeout, limit, tries, last)
}

// UnknownOutcomeError is a write that may or may not have taken effect:
// its answer was lost and no retry (same request id) settled it within
// the limit. It is ErrUnknownOutcome.
type UnknownOutcomeError struct {
	RequestID string
	Tries     int
	Limit     time.Duration
	Cause     error // why the outcome is open
	Last      error // the last try's error
}

func (e *UnknownOutcomeError) Error() string {
	return fmt.Sprintf("outcome unknown: %v, and no retry settled it within %s (%d tries with request id %s; last: %v)",
		e.Cause, e.Limit, e.Tries, e.RequestID, e.Last)
}

// Is makes it ErrUnknownOutcome.
func (e *UnknownOutcomeError) Is(target error) bool { return target == ErrUnknownOutcome }

// Unwrap gives the last try's error.
func (e *UnknownOutcomeError) Unwrap() error { return e.Last }

func (c *conn) notify(msg string) {
	if f := c.onRetry.Load(); f != nil && *f != nil {
		(*f)(msg)
	}
}

// try sends k to base, following up to 5 redirects, within one try's
// deadline: tryTimeout plus k.wait until the answer's headers arrive.
// The body is then read under ctx alone (the call's overall limit): a
// large answer (20,000 jobs, a long history) on a busy machine may take
// longer than a try, and a peer that answered is not one to skip.
func (c *conn) try(ctx context.Context, base string, k call) tryResult {
	tctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(tryTimeout+k.wait, cancel)
	done := func() { timer.Stop(); cancel() }
	u := base + k.target
	r := tryResult{at: c.where(base), base: base}
	for ; r.hops <= 5; r.hops++ {
		resp, sent, err := c.send(tctx, u, k)
		if err != nil {
			done()
			r.err, r.sent = err, sent
			return r
		}
		if resp.StatusCode != http.StatusTemporaryRedirect && resp.StatusCode != http.StatusPermanentRedirect {
			if !timer.Stop() {
				resp.Body.Close()
				done()
				r.err, r.sent = context.DeadlineExceeded, true
				return r
			}
			resp.Body = &closer{ReadCloser: resp.Body, done: done}
			r.resp = resp
			return r
		}
		loc, lerr := resp.Location()
		resp.Body.Close()
		if lerr != nil {
			done()
			r.err = fmt.Errorf("schedd at %s redirected without a usable Location: %v", r.at, lerr)
			return r
		}
		u = loc.String()
		r.base = loc.Scheme + "://" + loc.Host
		r.at = fmt.Sprintf("%s (the leader, as %s said)", r.base, r.at)
	}
	done()
	r.err = fmt.Errorf("schedd redirected %s more than 5 times", k.target)
	return r
}

// send makes one HTTP request. sent reports whether an error came after
// the connection was made (the request may have been received).
func (c *conn) send(ctx context.Context, u string, k call) (resp *http.Response, sent bool, err error) {
	var rd io.Reader
	if k.body != nil {
		rd = bytes.NewReader(k.body)
	}
	if k.bodyFn != nil {
		if rd, err = k.bodyFn(); err != nil {
			return nil, false, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, k.method, u, rd)
	if err != nil {
		return nil, false, err
	}
	for h, vs := range k.header {
		req.Header[h] = vs
	}
	if rd != nil {
		req.Header.Set("Content-Type", k.ctype)
	}
	if k.requestID != "" {
		req.Header.Set(api.RequestHeader, k.requestID)
	}
	if t := *c.token.Load(); t != "" && req.URL.Host != "schedd" {
		if req.URL.Scheme == "http" && !loopback(req.URL.Hostname()) {
			return nil, false, fmt.Errorf("%w to %s: use https:// (schedd --tls-cert) or a unix socket", ErrPlainToken, req.URL.Host)
		}
		req.Header.Set("Authorization", "Bearer "+t)
	}
	resp, err = c.http.Do(req)
	if err != nil {
		return nil, !notSent(err), err
	}
	return resp, true, nil
}

// notSent reports whether a transport error means the request never
// left: the dial or the TLS handshake failed.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return permanent(err)
}

// permanent reports errors no retry mends: TLS trust and protocol
// mismatches, a token refused in clear text, a bad redirect.
func permanent(err error) bool {
	var (
		unknownCA *x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		record    tls.RecordHeaderError
	)
	return errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &record) || errors.Is(err, ErrPlainToken) ||
		errors.Is(err, ErrBadSnapshotFile) || errors.Is(err, errResend) || strings.Contains(err.Error(), "redirect")
}

// unreachable words a try's transport error, naming the address that
// failed (a redirect's target, not only the one configured).
func (c *conn) unreachable(r tryResult) error {
	if errors.Is(r.err, ErrPlainToken) || errors.Is(r.err, ErrBadSnapshotFile) || errors.Is(r.err, errResend) || strings.Contains(r.err.Error(), "redirect") {
		return r.err
	}
	cause := unwrapDial(r.err)
	var ue *url.Error
	if errors.As(r.err, &ue) && (errors.Is(ue.Err, context.Canceled) || errors.Is(ue.Err, context.DeadlineExceeded)) {
		cause = fmt.Errorf("no answer within %s", tryTimeout)
	}
	return fmt.Errorf("%w at %s: %v", ErrUnreachable, r.at, cause)
}

// where names base in messages: the configured address for a unix
// socket, else the URL.
func (c *conn) where(base string) string {
	if base == "http://schedd" {
		return c.addr
	}
	return base
}

func hostOf(base string) string {
	if base == "http://schedd" {
		return "schedd"
	}
	return base
}

// loopback reports whether host is this machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// closer ends a try's deadline when the caller closes the body.
type closer struct {
	io.ReadCloser
	done func()
}

func (b *closer) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}

// Write makes an upgraded stream writable through the wrapper.
func (b *closer) Write(p []byte) (int, error) {
	w, ok := b.ReadCloser.(io.Writer)
	if !ok {
		return 0, errors.New("schedd's answer is not a writable stream")
	}
	return w.Write(p)
}

// foreign reports whether resp comes from some other web server: schedd
// answers JSON (an octet stream for snapshots), never HTML.
func foreign(resp *http.Response) bool {
	ct := strings.ToLower(resp.Header.Get("Content-Type"))
	return strings.HasPrefix(ct, "text/html") || strings.HasPrefix(ct, "application/xhtml")
}

// waitOf is how long a blocking query may wait (?wait=, else schedd's
// default with ?index=).
func waitOf(q url.Values) time.Duration {
	if v := q.Get("wait"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return d
		}
	}
	if q.Get("index") != "" {
		return 30 * time.Second
	}
	return 0
}
