package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// snapshotFile is a troupe-snapshot/2 file: state, then accounting rows
// (the client checks lengths and sums, not what they hold).
func snapshotFile(state, rows []byte) []byte {
	ss, rs := sha256.Sum256(state), sha256.Sum256(rows)
	var b bytes.Buffer
	fmt.Fprintf(&b, "troupe-snapshot/2 index=7 bytes=%d sha256=%s\n", len(state), hex.EncodeToString(ss[:]))
	b.Write(state)
	fmt.Fprintf(&b, "troupe-accounting/1 rows=%d bytes=%d sha256=%s\n", bytes.Count(rows, []byte("\n")), len(rows), hex.EncodeToString(rs[:]))
	b.Write(rows)
	return b.Bytes()
}

// gatedReader serves r up to at, then waits for open before the rest.
type gatedReader struct {
	r    io.Reader
	at   int
	open chan struct{}
	n    int
}

func (g *gatedReader) Read(p []byte) (int, error) {
	if g.n >= g.at {
		<-g.open
	} else if len(p) > g.at-g.n {
		p = p[:g.at-g.n]
	}
	n, err := g.r.Read(p)
	g.n += n
	return n, err
}

// TestRestoreSnapshotStreams: the client sends a snapshot file as it
// reads it (schedd has its first bytes before the client has read the
// rest), whole and unchanged, and cuts the upload of a damaged one
// (a section's sha256 or length not its header's, bytes after its end)
// with ErrBadSnapshotFile, so schedd never gets the whole of it. A file
// is sent again from its start when the first try is redirected. The
// client used to read the whole file into memory before sending.
func TestRestoreSnapshotStreams(t *testing.T) {
	state := bytes.Repeat([]byte(`{"jobs":[]}`), 20000)
	rows := bytes.Repeat([]byte("{\"id\":1}\n"), 20000)
	good := snapshotFile(state, rows)
	type got struct {
		body []byte
		err  error
	}
	bodies := make(chan got, 4)
	first := make(chan struct{}, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("redirect") == "1" {
			http.Redirect(w, r, "/v1/snapshot?moved=1", http.StatusTemporaryRedirect)
			return
		}
		head := make([]byte, 10)
		if _, err := io.ReadFull(r.Body, head); err != nil {
			bodies <- got{nil, err}
			return
		}
		first <- struct{}{}
		rest, err := io.ReadAll(r.Body)
		bodies <- got{append(head, rest...), err}
		if err != nil {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jobs":3}`)
	}))
	defer srv.Close()
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Streamed: schedd reads the first bytes while the client still
	// holds back the rest.
	g := &gatedReader{r: bytes.NewReader(good), at: len(good) / 2, open: make(chan struct{})}
	done := make(chan error, 1)
	go func() { _, err := c.RestoreSnapshot(ctx, g, false); done <- err }()
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Error("schedd got nothing of the file while the client had half of it: the client holds the file before sending")
	}
	close(g.open)
	if err := <-done; err != nil {
		t.Fatalf("restore of a sound file: %v", err)
	}
	if b := <-bodies; b.err != nil || !bytes.Equal(b.body, good) {
		t.Fatalf("schedd got %d bytes (%v), want the file's %d unchanged", len(b.body), b.err, len(good))
	}

	// A file from disk, redirected once: sent again from its start.
	file := filepath.Join(t.TempDir(), "backup.snap")
	if err := os.WriteFile(file, good, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := c.roundTrip(ctx, call{method: http.MethodPost, target: "/v1/snapshot?redirect=1", bodyFn: snapshotBody(f), ctype: "application/octet-stream"}); err != nil {
		t.Fatalf("restore redirected: %v", err)
	}
	<-first
	if b := <-bodies; b.err != nil || !bytes.Equal(b.body, good) {
		t.Fatalf("after a redirect schedd got %d bytes (%v), want the file's %d from its start", len(b.body), b.err, len(good))
	}

	damaged := map[string][]byte{
		"state damaged":    bytes.Replace(bytes.Clone(good), []byte(`"jobs"`), []byte(`"jebs"`), 1),
		"rows damaged":     bytes.Replace(bytes.Clone(good), []byte("{\"id\":1}\n"), []byte("{\"id\":2}\n"), 1),
		"truncated":        good[:len(good)-5],
		"padded":           append(bytes.Clone(good), "x\n"...),
		"not a snapshot":   append([]byte("hello\n"), good...),
		"state cut short":  snapshotFile(state, rows)[:len(state)/2],
		"accounting gone ": good[:bytes.Index(good, []byte("troupe-accounting/1"))],
	}
	for name, b := range damaged {
		_, err := c.RestoreSnapshot(ctx, bytes.NewReader(b), false)
		if !errors.Is(err, ErrBadSnapshotFile) {
			t.Errorf("%s: %v, want ErrBadSnapshotFile", name, err)
		}
		select {
		case <-first:
		default:
		}
		select {
		case g := <-bodies:
			if g.err == nil && bytes.Equal(g.body, b) {
				t.Errorf("%s: schedd got the whole damaged file", name)
			}
		case <-time.After(5 * time.Second):
		}
	}
}
