package network

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDialLoopback: the nodelet reaches a port on the loopback of a
// container's namespace, and only there: the same port on the node's
// own loopback, a container without a namespace, and a file that is not
// a pinned namespace are refused.
func TestDialLoopback(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	dir := filepath.Join(t.TempDir(), "netns")
	m, err := New(dir, "node1", "10.250.0.1", "")
	if err != nil {
		t.Fatal(err)
	}
	ep, id := attach(t, m, 1, 300, 1, "main1", false)
	in := listenIn(t, ep.NetNS, "127.0.0.1:0")
	port := in.Addr().(*net.TCPAddr).Port

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := m.DialLoopback(ctx, id, port)
	if err != nil {
		t.Fatalf("DialLoopback(%s, %d): %v", id, port, err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if err != nil || strings.TrimSpace(got) != "127.0.0.1" {
		t.Fatalf("container's server answered %q, %v; want 127.0.0.1", got, err)
	}

	// A server on the node's loopback, on a port free in the container:
	// the dial must not reach it.
	host, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go serve(host)
	hp := host.Addr().(*net.TCPAddr).Port
	if c, err := m.DialLoopback(ctx, id, hp); err == nil {
		c.Close()
		t.Fatalf("DialLoopback(%s, %d) reached the node's loopback", id, hp)
	}
	// The thread that dialled went back: the node's server still answers
	// this goroutine's dials, and they reach the node's, not the
	// container's.
	if c, err := net.Dial("tcp4", "127.0.0.1:"+strconv.Itoa(hp)); err != nil {
		t.Fatalf("node's own server after the dials: %v", err)
	} else {
		c.Close()
	}

	if _, err := m.DialLoopback(ctx, "j9-main1", port); !errors.Is(err, ErrNoNamespace) {
		t.Errorf("DialLoopback of a container without a namespace: %v, want ErrNoNamespace", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plain"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := m.DialLoopback(ctx, "plain", port); !errors.Is(err, ErrNoNamespace) {
		t.Errorf("DialLoopback of a plain file: %v, want ErrNoNamespace", err)
	}
	if err := os.Symlink(ep.NetNS, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if c, err := m.DialLoopback(ctx, "link", port); err == nil {
		c.Close()
		t.Errorf("DialLoopback followed a symlink")
	}
	if _, err := m.DialLoopback(ctx, id, 0); err == nil {
		t.Errorf("DialLoopback of port 0 succeeded")
	}
}
