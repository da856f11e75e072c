package connlimit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
)

// ErrNearLimit marks a request refused because the process is near its
// limit of open files and the request is not the nodes' (HTTP 503).
var ErrNearLimit = errors.New("near the limit of open files")

// Guard counts the connections of the listeners it wraps (Listen) and
// keeps the last Reserve descriptors under the limit of open files for
// the nodes' traffic:
//
//   - Admit refuses a request that is not the nodes' once the process
//     holds more than the limit less the reserve (the refusal closes the
//     connection);
//   - at accept, past the limit less half the reserve, and when accept
//     itself fails for want of descriptors, the oldest connections that
//     are idle or carry no request yet, and never carried a node's
//     request (MarkNode), are closed until the whole reserve is free
//     again.
//
// So users' connections, held open or not, cannot take the descriptors
// a node's next heartbeat needs. The http.Server of a wrapped listener
// must set ConnState and ConnContext to the Guard's.
type Guard struct {
	// Reserve is the descriptors kept; 0: DefaultReserve of the limit.
	Reserve int
	// Limit is the limit of open files; nil: NoFile, asked each time
	// (so a limit changed while the process runs counts).
	Limit func() int
	// Shed, when set, is told of connections closed to make room.
	Shed func(n, open int)

	base  int // descriptors open when the guard was made
	mu    sync.Mutex
	conns map[*Conn]struct{}
	seq   uint64
	open  atomic.Int64
}

// NewGuard is a Guard counting the descriptors the process has open now
// (its files, listeners) as taken.
func NewGuard(reserve int) *Guard {
	g := &Guard{Reserve: reserve, conns: map[*Conn]struct{}{}}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		g.base = len(ents)
	}
	return g
}

// Conn is a connection of a guarded listener.
type Conn struct {
	net.Conn
	g     *Guard
	seq   uint64
	node  atomic.Bool
	state atomic.Int32 // http.ConnState
	once  sync.Once
}

// NetConn is the connection Conn wraps.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Close closes the connection and stops counting it.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.g.remove(c) })
	return err
}

func (g *Guard) limits() (limit, reserve int) {
	limit = NoFile()
	if g.Limit != nil {
		limit = g.Limit()
	}
	reserve = g.Reserve
	if reserve <= 0 {
		reserve = DefaultReserve(limit)
	}
	return limit, reserve
}

// Used is the descriptors counted as taken: the process's own at start
// and the connections open.
func (g *Guard) Used() int { return g.base + int(g.open.Load()) }

func (g *Guard) add(c net.Conn) *Conn {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seq++
	gc := &Conn{Conn: c, g: g, seq: g.seq}
	gc.state.Store(int32(http.StateNew))
	g.conns[gc] = struct{}{}
	g.open.Add(1)
	return gc
}

func (g *Guard) remove(c *Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.conns[c]; ok {
		delete(g.conns, c)
		g.open.Add(-1)
	}
}

// Listen wraps l: its connections are counted and may be shed.
func (g *Guard) Listen(l net.Listener) net.Listener { return &listener{Listener: l, g: g} }

type listener struct {
	net.Listener
	g *Guard
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			// The server tries again after a pause; by then the
			// connections shed have given their descriptors back.
			l.g.shed(true)
		}
		return nil, err
	}
	gc := l.g.add(c)
	if limit, reserve := l.g.limits(); limit > 0 && l.g.Used() >= limit-reserve/2 {
		l.g.shed(false)
	}
	return gc, nil
}

// shed closes the oldest connections that are idle or new and never
// carried node traffic, until the reserve is free again (any at all
// when force).
func (g *Guard) shed(force bool) {
	limit, reserve := g.limits()
	g.mu.Lock()
	var idle []*Conn
	for c := range g.conns {
		if s := http.ConnState(c.state.Load()); !c.node.Load() && (s == http.StateNew || s == http.StateIdle) {
			idle = append(idle, c)
		}
	}
	g.mu.Unlock()
	slices.SortFunc(idle, func(a, b *Conn) int { return cmp.Compare(a.seq, b.seq) })
	n := 0
	for _, c := range idle {
		if g.Used() <= limit-reserve && !(force && n == 0) {
			break
		}
		c.Close()
		n++
	}
	if n > 0 && g.Shed != nil {
		g.Shed(n, int(g.open.Load()))
	}
}

// find is the guarded connection under c, nil if none.
func find(c net.Conn) *Conn {
	for c != nil {
		if gc, ok := c.(*Conn); ok {
			return gc
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

// ConnState follows each connection's state (http.Server.ConnState).
func (g *Guard) ConnState(c net.Conn, s http.ConnState) {
	if gc := find(c); gc != nil {
		gc.state.Store(int32(s))
	}
}

type connKey struct{}

// ConnContext puts the guarded connection under c in ctx
// (http.Server.ConnContext), for MarkNode and Admit.
func (g *Guard) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if gc := find(c); gc != nil {
		return context.WithValue(ctx, connKey{}, gc)
	}
	return ctx
}

// MarkNode records that the connection of a request's ctx carries a
// node's traffic (the request was authorized as the node's): it is never
// shed and its requests are always admitted.
func MarkNode(ctx context.Context) {
	if gc, ok := ctx.Value(connKey{}).(*Conn); ok {
		gc.node.Store(true)
	}
}

// Admit lets a request through unless the process is past its limit
// less the reserve and the request is not node traffic: node says the
// request is (its path is a node's endpoint), or its connection carried
// a node's request before.
func (g *Guard) Admit(ctx context.Context, node bool) error {
	if node {
		return nil
	}
	if gc, ok := ctx.Value(connKey{}).(*Conn); ok && gc.node.Load() {
		return nil
	}
	limit, reserve := g.limits()
	if used := g.Used(); limit > 0 && used >= limit-reserve {
		return fmt.Errorf("%w: %d of %d open files are taken and the last %d are kept for the nodes' traffic (--fd-reserve); retry later", ErrNearLimit, used, limit, reserve)
	}
	return nil
}
