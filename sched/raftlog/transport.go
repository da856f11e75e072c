package raftlog

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// ErrPeerRefused marks a raft connection refused at its handshake: no
// certificate from the cluster CA, or not speaking troupe's raft.
var ErrPeerRefused = errors.New("raft peer refused")

// PeerTLS loads the peers' mutual TLS: this peer presents certFile (with
// keyFile) and accepts only peers whose certificate chains to caFile, in
// both directions. caFile "" trusts certFile itself as the CA: peers that
// share one self-signed pair (schedd's dev certificate, or a site's
// cluster certificate copied to every peer) recognise each other and
// nobody else. Host names are not checked: the CA decides who is a peer.
func PeerTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("raft peer certificate: %w", err)
	}
	if caFile == "" {
		caFile = certFile
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("raft peer CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("raft peer CA %s holds no PEM certificate", caFile)
	}
	verify := func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return fmt.Errorf("%w: no certificate", ErrPeerRefused)
		}
		certs := make([]*x509.Certificate, len(raw))
		for i, b := range raw {
			c, err := x509.ParseCertificate(b)
			if err != nil {
				return fmt.Errorf("%w: %v", ErrPeerRefused, err)
			}
			certs[i] = c
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		// Any key usage: a dev certificate is made for serving only.
		if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			return fmt.Errorf("%w: certificate of %q not from the cluster CA: %v", ErrPeerRefused, certs[0].Subject.CommonName, err)
		}
		return nil
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS13,
		// Both sides verify the other against the cluster CA themselves
		// (verify): the standard checks want host names and usages.
		ClientAuth:            tls.RequireAnyClientCert,
		InsecureSkipVerify:    true, //nolint:gosec // verified by VerifyPeerCertificate
		VerifyPeerCertificate: verify,
	}, nil
}

// hello is the line each side of a raft connection sends after the TLS
// handshake: the protocol, its raft id and its API address. It lets a
// peer learn the leader's API address from raft itself (the leader
// dials every follower), not from a replicated state it may not have
// replayed yet.
const helloProto = "troupe-raft/1"

const helloTimeout = 5 * time.Second

// schemaProto opens a connection that carries no raft: a peer tells the
// leader the newest state schema it reads ("troupe-schema/1 ID VERSION")
// in place of its hello, and a leader that knows the line answers
// "troupe-schema/1 ok" and closes. A leader of a release before these
// lines refuses the hello and closes: the peer then knows it need not
// tell that leader again. The leader writes entries in the oldest schema
// its peers read (Log.writeSchema).
const schemaProto = "troupe-schema/1"

// errSchemaTold ends an accepted connection that only told its peer's
// schema: nothing for raft.
var errSchemaTold = errors.New("schema told")

// errOldLeader: the leader refused a schema line (an older release).
var errOldLeader = errors.New("the leader does not take schema lines")

// streamLayer is raft's network: TCP, mutual TLS when tls is set, and the
// hello exchange. Connections that fail either are closed before raft
// reads a byte from them.
type streamLayer struct {
	ln      net.Listener
	tls     *tls.Config
	id, api string
	book    *peerBook
	conns   chan net.Conn
	done    chan struct{}
	once    sync.Once
	log     io.Writer
	dialer  func(network, addr string, timeout time.Duration) (net.Conn, error)

	mu   sync.Mutex
	live map[*trackedConn]struct{}
}

// trackedConn is a connection the stream layer can cut at shutdown, from
// its first byte (a handshake to a silent peer included).
type trackedConn struct {
	net.Conn
	s    *streamLayer
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.live, c)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}

func (s *streamLayer) track(c net.Conn) net.Conn {
	t := &trackedConn{Conn: c, s: s}
	s.mu.Lock()
	s.live[t] = struct{}{}
	s.mu.Unlock()
	select {
	case <-s.done: // closed meanwhile: closeAll may have missed it
		t.Close()
	default:
	}
	return t
}

// closeAll cuts every connection, in flight or pooled: raft's goroutines
// blocked on one return.
func (s *streamLayer) closeAll() {
	s.mu.Lock()
	live := make([]*trackedConn, 0, len(s.live))
	for c := range s.live {
		live = append(live, c)
	}
	s.mu.Unlock()
	for _, c := range live {
		c.Close()
	}
}

func newStreamLayer(bind string, tc *tls.Config, id, api string, book *peerBook, logOut io.Writer, wrap func(net.Conn) net.Conn) (*streamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	dialer := net.DialTimeout
	if wrap != nil {
		ln = wrappedListener{Listener: ln, wrap: wrap}
		dialer = func(network, addr string, timeout time.Duration) (net.Conn, error) {
			c, err := net.DialTimeout(network, addr, timeout)
			if err != nil {
				return nil, err
			}
			return wrap(c), nil
		}
	}
	s := &streamLayer{ln: ln, tls: tc, id: id, api: api, book: book, conns: make(chan net.Conn),
		done: make(chan struct{}), log: logOut, dialer: dialer, live: map[*trackedConn]struct{}{}}
	go s.acceptLoop()
	return s, nil
}

// wrappedListener wraps each connection it accepts.
type wrappedListener struct {
	net.Listener
	wrap func(net.Conn) net.Conn
}

func (l wrappedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.wrap(c), nil
}

func (s *streamLayer) acceptLoop() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		c = s.track(c)
		go func() {
			hc, err := s.handshake(c, false)
			if errors.Is(err, errSchemaTold) {
				c.Close()
				return
			}
			if err != nil {
				fmt.Fprintf(s.log, "raft: refused a connection from %s: %v\n", c.RemoteAddr(), err)
				c.Close()
				return
			}
			select {
			case s.conns <- hc:
			case <-s.done:
				hc.Close()
			}
		}()
	}
}

// Accept returns the next connection that passed the handshake.
func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

func (s *streamLayer) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		err = s.ln.Close()
	})
	return err
}

func (s *streamLayer) Addr() net.Addr { return s.ln.Addr() }

// Dial connects to a peer and does the handshake.
func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	select {
	case <-s.done:
		return nil, net.ErrClosed
	default:
	}
	c, err := s.dialer("tcp", string(addr), timeout)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUnreachable, err)
	}
	c = s.track(c)
	hc, err := s.handshake(c, true)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("raft peer %s: %w (%w)", addr, err, errUnreachable)
	}
	return hc, nil
}

// handshake runs TLS (when configured) and the hello exchange on c.
func (s *streamLayer) handshake(c net.Conn, client bool) (net.Conn, error) {
	if err := c.SetDeadline(time.Now().Add(helloTimeout)); err != nil {
		return nil, err
	}
	if s.tls != nil {
		var tc *tls.Conn
		if client {
			tc = tls.Client(c, s.tls)
		} else {
			tc = tls.Server(c, s.tls)
		}
		if err := tc.Handshake(); err != nil {
			return nil, fmt.Errorf("%w: tls: %v", ErrPeerRefused, err)
		}
		c = tc
	}
	if _, err := fmt.Fprintf(c, "%s %s %s\n", helloProto, s.id, orDash(s.api)); err != nil {
		return nil, err
	}
	line, err := readLine(c, 1024)
	if err != nil {
		return nil, fmt.Errorf("%w: no hello: %v", ErrPeerRefused, err)
	}
	f := strings.Fields(line)
	if !client && len(f) == 3 && f[0] == schemaProto {
		return nil, s.takeSchema(c, f[1], f[2])
	}
	if len(f) != 3 || f[0] != helloProto {
		return nil, fmt.Errorf("%w: bad hello %.40q", ErrPeerRefused, line)
	}
	if s.book != nil && f[2] != "-" {
		s.book.set(f[1], f[2])
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return c, nil
}

// takeSchema records the schema a peer told (its line's id and version)
// and answers it.
func (s *streamLayer) takeSchema(c net.Conn, id, version string) error {
	v, err := strconv.Atoi(version)
	if err != nil || v < 1 {
		return fmt.Errorf("%w: bad schema version %.20q from %q", ErrPeerRefused, version, id)
	}
	if s.book != nil {
		s.book.setSchema(id, v, time.Now())
	}
	if _, err := fmt.Fprintf(c, "%s ok\n", schemaProto); err != nil {
		return err
	}
	return errSchemaTold
}

// tellSchema tells the leader at addr the newest schema this peer reads.
// errOldLeader: the leader answered with its hello but took no schema
// line.
func (s *streamLayer) tellSchema(addr string, version int, timeout time.Duration) error {
	c, err := s.dialer("tcp", addr, timeout)
	if err != nil {
		return fmt.Errorf("%w: %v", errUnreachable, err)
	}
	c = s.track(c)
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(helloTimeout)); err != nil {
		return err
	}
	if s.tls != nil {
		tc := tls.Client(c, s.tls)
		if err := tc.Handshake(); err != nil {
			return fmt.Errorf("%w: tls: %v", ErrPeerRefused, err)
		}
		c = tc
	}
	if _, err := fmt.Fprintf(c, "%s %s %d\n", schemaProto, s.id, version); err != nil {
		return err
	}
	if _, err := readLine(c, 1024); err != nil { // the leader's hello
		return fmt.Errorf("schema line to %s: no hello: %w", addr, err)
	}
	ack, err := readLine(c, 1024)
	if err != nil || ack != schemaProto+" ok" {
		return fmt.Errorf("%w (%s)", errOldLeader, addr)
	}
	return nil
}

func orDash(s string) string {
	if s == "" || strings.ContainsAny(s, " \n") {
		return "-"
	}
	return s
}

// readLine reads up to '\n' a byte at a time, so that nothing after the
// line (raft's first RPC) is consumed.
func readLine(r io.Reader, max int) (string, error) {
	var b []byte
	one := make([]byte, 1)
	for len(b) < max {
		if _, err := io.ReadFull(r, one); err != nil {
			return "", err
		}
		if one[0] == '\n' {
			return string(b), nil
		}
		b = append(b, one[0])
	}
	return "", fmt.Errorf("line longer than %d bytes", max)
}

// peerBook maps raft server ids to the API addresses their hellos gave,
// and to the schemas they told (the leader's).
type peerBook struct {
	mu     sync.Mutex
	api    map[string]string
	schema map[string]told
}

// told is a schema a peer told, and when.
type told struct {
	version int
	at      time.Time
}

func (b *peerBook) setSchema(id string, v int, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.schema == nil {
		b.schema = map[string]told{}
	}
	b.schema[id] = told{v, at}
}

// schemas are the schemas told since since, by peer id.
func (b *peerBook) schemas(since time.Time) map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for id, t := range b.schema {
		if !t.at.Before(since) {
			out[id] = t.version
		}
	}
	return out
}

func (b *peerBook) set(id, api string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.api == nil {
		b.api = map[string]string{}
	}
	b.api[id] = api
}

func (b *peerBook) get(id string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.api[id]
}

// transport is raft's network transport with two changes for schedd:
//
//   - no pipelined replication: its goroutines outlived raft.Shutdown
//     after partitions, and one AppendEntries in flight per follower is
//     enough for schedd's write rate;
//   - an AppendEntries that replicates (not a heartbeat) to a peer that
//     cannot be reached waits for it, redialling, for up to peerWait
//     rather than failing at once. raft backs off exponentially after
//     each failure (to about 10 s after a dozen); a follower that comes
//     back would wait out that back-off before it learns the commit index
//     and can apply its own log. Waiting here keeps the failure count
//     low, so a restarted or healed follower is caught up within a
//     redial period.
type transport struct {
	*raft.NetworkTransport
	stream *streamLayer
}

// peerWait bounds how long one replicating AppendEntries waits for an
// unreachable peer; redial is how often it tries.
const (
	peerWait = 30 * time.Second
	redial   = 100 * time.Millisecond
)

func (t *transport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

func (t *transport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	heartbeat := len(args.Entries) == 0 && args.PrevLogEntry == 0 && args.LeaderCommitIndex == 0
	deadline := time.Now().Add(peerWait)
	for {
		err := t.NetworkTransport.AppendEntries(id, target, args, resp)
		if err == nil || heartbeat || !errors.Is(err, errUnreachable) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-time.After(redial):
		case <-t.stream.done:
			return err
		}
	}
}

// errUnreachable marks a dial that found no peer to talk to.
var errUnreachable = errors.New("raft peer unreachable")
