package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestAddrBelowEphemeral: the address is loopback, its port below the
// kernel's ephemeral range and at least lowest, and free: a server can
// listen on it.
func TestAddrBelowEphemeral(t *testing.T) {
	top := ephemeralLow()
	for range 20 {
		addr := Addr(t)
		host, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if host != "127.0.0.1" || port < lowest || port >= top {
			t.Fatalf("Addr gave %s, want 127.0.0.1 and a port in [%d, %d)", addr, lowest, top)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listening on %s: %v", addr, err)
		}
		l.Close()
	}
}

// TestAddrNeverTwice: no two calls in one process give the same address,
// even once the first one's server has gone.
func TestAddrNeverTwice(t *testing.T) {
	seen := map[string]bool{}
	for range 500 {
		addr := Addr(t)
		if seen[addr] {
			t.Fatalf("Addr gave %s twice", addr)
		}
		seen[addr] = true
	}
}
