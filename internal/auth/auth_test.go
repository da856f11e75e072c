package auth

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestPeerCreds serves HTTP on a real unix socket: the handler sees the
// client process's uid and gid, as the kernel reports them.
func TestPeerCreds(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{ConnContext: PeerCreds(-1), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := FromContext(r.Context())
		if !ok {
			http.Error(w, "no identity", 500)
			return
		}
		_, _ = io.WriteString(w, strconv.Itoa(id.UID)+":"+strconv.Itoa(id.GID)+":"+strconv.FormatBool(id.Admin))
	})}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := c.Get("http://x/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid()) + ":" + strconv.FormatBool(os.Getuid() == 0)
	if string(b) != want {
		t.Fatalf("identity %q, want %q", b, want)
	}
}

func TestLookupAdminGroup(t *testing.T) {
	if id := Lookup(1234, 4321, 0, 4321); !id.Admin || id.User != "1234" {
		t.Fatalf("uid 1234 in admin gid 4321: %+v", id)
	}
	if id := Lookup(1234, 1, 0, 4321); id.Admin {
		t.Fatalf("uid 1234 outside the admin group is admin: %+v", id)
	}
}
