// Package freeport picks a loopback TCP address for a server a test is
// about to start, usually in another process, whose address must be
// known before it starts (a raft peer list, a --metrics-addr).
//
// The usual way, listening on port 0 and closing the listener, hands
// out a port of the kernel's ephemeral range, and between the close and
// the server's bind that port can go to anything else that asks for a
// port the same way (another test's httptest server) or that connects
// anywhere (every outgoing connection takes its source port from the
// same range). A test then meets another server at the address it chose
// for its own, or its own next server, which may be given the same port
// back. Addr picks at random below the ephemeral range instead, where the
// kernel hands out no port by itself, and never the same port twice in
// one test binary: only another test binary that picks the same port at
// random can collide, one chance in tens of thousands.
//
// Only tests import it.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// lowest is the bottom of the range Addr picks from: above the
// privileged ports and the most common services'.
const lowest = 10000

// given are the ports Addr has handed out in this process.
var given struct {
	sync.Mutex
	ports map[int]bool
}

// Addr returns "127.0.0.1:PORT" with a port nothing listens on now,
// below the kernel's ephemeral range, that it has not returned before.
func Addr(tb testing.TB) string {
	tb.Helper()
	top := ephemeralLow()
	given.Lock()
	defer given.Unlock()
	if given.ports == nil {
		given.ports = map[int]bool{}
	}
	for range 200 {
		port := lowest + rand.IntN(top-lowest)
		if given.ports[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken: try another
		}
		addr := l.Addr().String()
		if err := l.Close(); err != nil {
			tb.Fatal(err)
		}
		given.ports[port] = true
		return addr
	}
	tb.Fatalf("freeport: no free port in %d-%d after 200 tries", lowest, top-1)
	return ""
}

// ephemeralLow is the first port of the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), 32768 when it cannot be read or leaves
// too little below it.
func ephemeralLow() int {
	const fallback = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return fallback
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return fallback
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo < lowest+1000 {
		return fallback
	}
	return lo
}
