// Package client talks to schedd's /v1 API over a unix socket or TCP.
//
// Every call has deadlines: a dial and an answer deadline per try (a
// blocking query's wait on top), and an overall limit (Timeout) across
// the tries. A try that fails goes to the next address of a peer list and
// follows a follower's redirect to the leader. Writes carry a request id
// (api.RequestHeader), the same on every try, so that schedd applies a
// write once however often it is sent; an answer that leaves the outcome
// open ("leadership lost while committing") or a connection lost after the
// request went out is retried with that id, and if no try settles it the
// call returns an error that is ErrUnknownOutcome, never a plain failure.
//
// A client reads its own writes: it keeps the state index its writes were
// answered at (Written), and its reads of the state wait for a peer that
// has applied it, leaving a peer still behind for the next (ErrBehind when
// none caught up within the limit).
//
// It must not import sched/... or nodelet/...: it knows the API
// (internal/api), not the controller.
package client

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// EnvAddr names the environment variable that tells tools where schedd is.
const EnvAddr = "TROUPE_ADDR"

// DefaultAddr is used when neither --addr nor TROUPE_ADDR is given.
const DefaultAddr = "unix:///run/troupe/schedd.sock"

// Errors a call returns, besides *APIError (schedd's refusals).
var (
	// ErrUnreachable: no address answered; nothing was applied.
	ErrUnreachable = errors.New("cannot reach schedd")
	// ErrUnknownOutcome: a write may or may not have taken effect (the
	// answer was lost, or schedd could not tell). Sending a new request
	// could do it twice: look (bjob, bqueue) first.
	ErrUnknownOutcome = errors.New("outcome unknown")
	// ErrTimeout: no answer within the overall limit (Timeout); a read,
	// or a write that never reached schedd.
	ErrTimeout = errors.New("timed out")
	// ErrNotSchedd: something else (a web server, a proxy's error page)
	// answered at the address.
	ErrNotSchedd = errors.New("not a troupe schedd")
	// ErrPlainToken: the client refuses to send a bearer token in clear
	// text to a host that is not this one.
	ErrPlainToken = errors.New("refusing to send a token over plain http")
	// ErrBehind: the peer asked answered from a state older than this
	// client's last write (a follower still catching up); the client
	// asks again, another peer first, and returns it (within
	// ErrTimeout) only when none caught up within the overall limit.
	ErrBehind = errors.New("schedd has not applied this client's last write yet")
)

// APIError is a non-2xx answer from schedd.
type APIError struct {
	Status  int
	Message string
	// Outcome is api.OutcomeNotApplied or api.OutcomeUnknown when schedd
	// said so (api.OutcomeHeader).
	Outcome string
	// Problems are a refused submission's reasons one by one, as schedd
	// listed them (Message joins them).
	Problems []api.Problem
}

func (e *APIError) Error() string { return e.Message }

// IsNotFound reports whether err is schedd saying 404.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// Environment variables the client reads besides EnvAddr.
const (
	EnvCA      = "TROUPE_CA"      // PEM file of the CA that signed schedd's TLS certificate
	EnvToken   = "TROUPE_TOKEN"   // bearer token for TCP addresses (else ~/.troupe/token)
	EnvTimeout = "TROUPE_TIMEOUT" // overall limit of one call, a duration such as 60s
)

// DefaultTimeout is the overall limit of one call (all its tries) when
// neither SetTimeout nor $TROUPE_TIMEOUT says otherwise; a blocking
// query's wait comes on top.
const DefaultTimeout = 60 * time.Second

// Per-try deadlines: dialling, and the whole answer of one try (a
// blocking query's wait on top). A frozen or cut-off peer costs one
// tryTimeout before the next address is tried.
var (
	dialTimeout = 2 * time.Second
	tryTimeout  = 3 * time.Second
	retryPause  = 200 * time.Millisecond
)

// IsUnauthorized reports whether err is schedd saying 401 (a missing,
// unknown or revoked bearer token).
func IsUnauthorized(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusUnauthorized
}

// Client is safe for concurrent use. Its calls are grouped by role in
// the types it embeds, each of which holds the one connection they share
// (conn: addresses, token, deadlines, retries and the index its reads
// wait for): jobCalls (submit, query, control, history), nodeCalls (the
// node list and a node agent's own calls), sessionCalls (terminals and
// apps), adminCalls (partitions, shares, snapshots, tokens, raft,
// accounting). The embedding keeps every call one selector away
// (c.Submit, c.Heartbeat).
type Client struct {
	*conn
	jobCalls
	nodeCalls
	sessionCalls
	adminCalls
}

// newClient is a client whose calls go through cn.
func newClient(cn *conn) *Client {
	return &Client{conn: cn, jobCalls: jobCalls{cn}, nodeCalls: nodeCalls{cn}, sessionCalls: sessionCalls{cn}, adminCalls: adminCalls{cn}}
}

// conn is a client's connection to schedd: its addresses, the leader a
// redirect named, its token and limits, and what every call goes
// through (Do, roundTrip).
type conn struct {
	addr    string
	bases   []string // one per address, in the order given
	plain   []string // the http:// addresses of other hosts among them
	cur     atomic.Int32
	leader  atomic.Pointer[string] // base of the leader a redirect led to
	token   atomic.Pointer[string]
	timeout atomic.Int64
	onRetry atomic.Pointer[func(string)]
	// written is the highest state index a write of this client was
	// answered at (api.IndexHeader): its reads of the state wait for a
	// peer that has applied it (readFloor).
	written atomic.Uint64
	http    *http.Client
}

// ResolveAddr picks the flag value, else $TROUPE_ADDR, else DefaultAddr.
func ResolveAddr(flag string) string {
	if flag != "" {
		return flag
	}
	if v := os.Getenv(EnvAddr); v != "" {
		return v
	}
	return DefaultAddr
}

// New returns a client for addr: "unix:///path/sock", "/path/sock",
// "https://host:port", "host:port" (https) or "http://host:port" (plain
// text: see Plain), or a comma-separated list of TCP addresses (the peers
// of an HA schedd): the client tries them in turn and follows a
// follower's redirect to the leader. For https it trusts the system's CAs
// and the PEM file $TROUPE_CA; to TCP addresses it sends the bearer token
// $TROUPE_TOKEN, else the first line of ~/.troupe/token, but never in
// clear text to another host (ErrPlainToken). $TROUPE_TIMEOUT sets the
// overall limit of a call (default DefaultTimeout).
func New(addr string) (*Client, error) {
	tok := os.Getenv(EnvToken)
	if tok == "" {
		if home, err := os.UserHomeDir(); err == nil {
			if b, err := os.ReadFile(filepath.Join(home, ".troupe", "token")); err == nil {
				tok = strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
			}
		}
	}
	c, err := NewWith(addr, Options{CA: os.Getenv(EnvCA), Token: tok})
	if err != nil {
		return nil, err
	}
	if v := os.Getenv(EnvTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("$%s=%q: want a duration such as 60s", EnvTimeout, v)
		}
		c.SetTimeout(d)
	}
	return c, nil
}

// Options are what New takes from the environment, for programs that
// take them otherwise (nodelet's --ca and credential).
type Options struct {
	CA    string // PEM file of a CA to trust besides the system's
	Token string // bearer token for TCP addresses
	// IdleConns is how many idle connections to each address the client
	// keeps for reuse (0: 16). A program that holds a blocking query
	// open per node, such as troupe-nodesim's thousands of nodes, keeps
	// one per node, or every answer closes a connection and the next
	// query dials a new one.
	IdleConns int
}

// NewWith is New with the CA and token given rather than read from the
// environment.
func NewWith(addr string, o Options) (*Client, error) {
	c := newClient(&conn{addr: addr})
	tr := &http.Transport{MaxIdleConnsPerHost: cmp.Or(o.IdleConns, 16), IdleConnTimeout: 90 * time.Second,
		DialContext: (&net.Dialer{Timeout: dialTimeout}).DialContext, TLSHandshakeTimeout: tryTimeout}
	for _, a := range strings.Split(addr, ",") {
		a = strings.TrimSpace(a)
		switch {
		case strings.HasPrefix(a, "unix://") || strings.HasPrefix(a, "/"):
			if strings.Contains(addr, ",") {
				return nil, fmt.Errorf("schedd address %q: a unix socket cannot be part of an address list", addr)
			}
			path := strings.TrimPrefix(a, "unix://")
			tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
				d := net.Dialer{Timeout: dialTimeout}
				return d.DialContext(ctx, "unix", path)
			}
			c.bases = append(c.bases, "http://schedd")
		case strings.HasPrefix(a, "http://"):
			c.bases = append(c.bases, strings.TrimRight(a, "/"))
			if u, err := url.Parse(a); err != nil || !loopback(u.Hostname()) {
				c.plain = append(c.plain, a)
			}
		case strings.HasPrefix(a, "https://"):
			c.bases = append(c.bases, strings.TrimRight(a, "/"))
		case strings.Contains(a, "://"):
			return nil, fmt.Errorf("schedd address %q: want unix://, https:// or http://", a)
		case a != "":
			c.bases = append(c.bases, "https://"+strings.TrimRight(a, "/")) // TLS unless http:// says otherwise
		}
	}
	if len(c.bases) == 0 {
		return nil, fmt.Errorf("empty schedd address")
	}
	if ca := o.CA; ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", ca)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	c.SetToken(o.Token)
	c.SetTimeout(DefaultTimeout)
	c.http = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return c, nil
}

// WithToken is a client for the same addresses that sends token ("" none)
// instead: it shares c's connections, settings and leader, so that one
// process acting for many nodes (troupe-nodesim), each with its own
// credential, holds one connection pool, not one per node.
func (c *Client) WithToken(token string) *Client {
	d := newClient(&conn{addr: c.addr, bases: c.bases, plain: c.plain, http: c.http})
	d.cur.Store(c.cur.Load())
	d.leader.Store(c.leader.Load())
	d.timeout.Store(c.timeout.Load())
	d.onRetry.Store(c.onRetry.Load())
	d.SetToken(token)
	return d
}

// SetToken sets the bearer token sent to TCP addresses ("" none).
func (c *conn) SetToken(t string) { c.token.Store(&t) }

// SetTimeout sets the overall limit of one call: its tries across the
// addresses, leader changes included (a blocking query's wait on top).
func (c *conn) SetTimeout(d time.Duration) { c.timeout.Store(int64(d)) }

// Timeout is the overall limit of one call.
func (c *conn) Timeout() time.Duration { return time.Duration(c.timeout.Load()) }

// OnRetry sets a function told, in one line, when a write is sent again
// after its first answer was lost ("retrying with the same request id"):
// the CLIs print it, so a user sees why a command takes longer.
func (c *conn) OnRetry(f func(msg string)) { c.onRetry.Store(&f) }

// Plain lists the addresses given as http:// that are not this host
// (clear text on the network; no token is sent to them): the CLIs warn
// about them.
func (c *conn) Plain() []string { return c.plain }

// Next makes the next call start at the next address of the list (a
// caller that got a stale answer from a lagging follower asks another
// peer); with one address it changes nothing.
func (c *conn) Next() {
	c.leader.Store(nil)
	c.cur.Store(int32((int(c.cur.Load()) + 1) % len(c.bases)))
}

// Written is the state index of this client's last write (its highest,
// 0 before any write answered one): every read of the state it sends
// afterwards is answered from that index or a later one, whichever peer
// answers (docs/client-guarantees.md, "Reads").
func (c *conn) Written() uint64 { return c.written.Load() }

// SawWrite raises the index this client's reads wait for to idx (a
// write's index known otherwise, such as one another process made and
// passed on); a lower one changes nothing.
func (c *conn) SawWrite(idx uint64) {
	for {
		cur := c.written.Load()
		if idx <= cur || c.written.CompareAndSwap(cur, idx) {
			return
		}
	}
}

// Addr is the address the client was made for.
func (c *conn) Addr() string { return c.addr }

// Do sends in (if non-nil) as JSON and decodes the answer into out (if
// non-nil). It returns the X-Troupe-Index of the answer.
func (c *conn) Do(ctx context.Context, method, path string, query url.Values, in, out any) (uint64, error) {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = b
	}
	target := path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	resp, err := c.roundTrip(ctx, call{method: method, target: target, body: body, ctype: "application/json", wait: waitOf(query)})
	if err != nil {
		return 0, err
	}
	defer drainClose(resp)
	idx, _ := strconv.ParseUint(resp.Header.Get(api.IndexHeader), 10, 64)
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return idx, fmt.Errorf("decoding answer of %s %s: %w", method, path, err)
		}
	}
	return idx, nil
}

// drainClose reads what is left of a small answer (the newline after
// its JSON) before closing it: a body closed unread costs its
// connection, and the next call would dial a new one.
func drainClose(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

func apiError(resp *http.Response) *APIError {
	defer resp.Body.Close()
	var e api.Error
	b, _ := io.ReadAll(resp.Body)
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		e.Error = strings.TrimSpace(string(b))
	}
	return &APIError{Status: resp.StatusCode, Message: e.Error, Outcome: resp.Header.Get(api.OutcomeHeader), Problems: e.Problems}
}

func unwrapDial(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

func blocking(index uint64, wait time.Duration) url.Values {
	if index == 0 {
		return nil
	}
	q := url.Values{"index": {strconv.FormatUint(index, 10)}}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	return q
}
