package sched

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/state"
)

// A snapshot file (badmin snapshot save|restore) is one header line and
// the raft FSM's state dump as JSON:
//
//	troupe-snapshot/1 index=1234 bytes=56789 sha256=<hex of the body>\n
//	{"jobs":[...],"nodes":[...],...}
//
// Restore reads the whole body, checks its length and checksum and
// decodes it before anything changes: a damaged file is refused and the
// live state stays as it was.
const snapMagic = "troupe-snapshot/1"

// maxSnapshot bounds a snapshot file restore accepts.
const maxSnapshot = 4 << 30

// ErrBadSnapshot marks a snapshot file that is damaged or not one.
var ErrBadSnapshot = fmt.Errorf("%w: snapshot file refused", ErrInvalid)

// SaveSnapshot writes the state as of now, in the snapshot file format.
func (s *Server) SaveSnapshot(w io.Writer) error {
	v := s.st.Snapshot()
	idx, _ := v.Index()
	body, err := json.Marshal(v.Dump())
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	if _, err := fmt.Fprintf(w, "%s index=%d bytes=%d sha256=%s\n", snapMagic, idx, len(body), hex.EncodeToString(sum[:])); err != nil {
		return err
	}
	_, err = w.Write(body)
	return err
}

// ReadSnapshot reads and checks a snapshot file.
func ReadSnapshot(r io.Reader) (state.Dump, error) {
	var d state.Dump
	br := bufio.NewReader(r)
	line, err := br.ReadString('\n')
	if err != nil {
		return d, fmt.Errorf("%w: no header line (%v)", ErrBadSnapshot, err)
	}
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != snapMagic {
		return d, fmt.Errorf("%w: the header is not %q followed by index, bytes and sha256", ErrBadSnapshot, snapMagic)
	}
	n, err1 := strconv.ParseInt(strings.TrimPrefix(f[2], "bytes="), 10, 64)
	want, err2 := hex.DecodeString(strings.TrimPrefix(f[3], "sha256="))
	if err1 != nil || err2 != nil || n < 0 || n > maxSnapshot || len(want) != sha256.Size ||
		!strings.HasPrefix(f[2], "bytes=") || !strings.HasPrefix(f[3], "sha256=") {
		return d, fmt.Errorf("%w: malformed header %q", ErrBadSnapshot, strings.TrimSpace(line))
	}
	body, err := io.ReadAll(io.LimitReader(br, n+1))
	if err != nil {
		return d, fmt.Errorf("%w: reading the body: %v", ErrBadSnapshot, err)
	}
	if int64(len(body)) != n {
		return d, fmt.Errorf("%w: the header says %d bytes, the file holds %d (truncated or padded)", ErrBadSnapshot, n, len(body))
	}
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], want) {
		return d, fmt.Errorf("%w: checksum mismatch: the body is damaged", ErrBadSnapshot)
	}
	// The version first: a newer schedd's snapshot may hold fields this
	// one does not know, and that is the error to name.
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(body, &head); err == nil {
		if err := state.CheckSchema(head.Version); err != nil {
			return d, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
		}
	}
	// Before schema 5 a node row was the whole view and carried its
	// derived allocation: read and dropped (state.LegacyNode).
	var legacy struct {
		state.Dump
		Nodes []*state.LegacyNode `json:"nodes"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&legacy); err != nil {
		return d, fmt.Errorf("%w: the body does not decode: %v", ErrBadSnapshot, err)
	}
	d = legacy.Dump
	for _, n := range legacy.Nodes {
		if n == nil {
			d.Nodes = append(d.Nodes, nil)
			continue
		}
		if n.Allocated != nil && head.Version >= 5 {
			return d, fmt.Errorf("%w: the body does not decode: node %q carries \"allocated\", which a schema %d row does not have", ErrBadSnapshot, n.Name, head.Version)
		}
		d.Nodes = append(d.Nodes, &n.Node)
	}
	seen := map[uint64]bool{}
	for _, j := range d.Jobs {
		if j == nil || j.ID == 0 || seen[j.ID] || len(j.Containers) == 0 {
			return d, fmt.Errorf("%w: a job entry is empty, repeated or without containers", ErrBadSnapshot)
		}
		seen[j.ID] = true
	}
	for _, n := range d.Nodes {
		if n == nil || n.Name == "" {
			return d, fmt.Errorf("%w: a node entry has no name", ErrBadSnapshot)
		}
	}
	return d, nil
}

// RestoreSnapshot checks the snapshot file in r and, only if it is
// whole, puts its state in force on every replica (a raft user restore);
// it answers how many jobs and nodes it restored.
func (s *Server) RestoreSnapshot(ctx context.Context, r io.Reader) (api.SnapshotRestored, error) {
	d, err := ReadSnapshot(r)
	if err != nil {
		return api.SnapshotRestored{}, err
	}
	if err := s.restore(ctx, &d); err != nil {
		return api.SnapshotRestored{}, err
	}
	res := api.SnapshotRestored{Jobs: len(d.Jobs), Nodes: len(d.Nodes)}
	// Move every table's index past the restore, so blocking queries
	// (nodelets' assignments) wake up and see the new state.
	if _, err := s.apply(ctx, state.Command{Kind: state.CmdTouch}); err != nil && !errors.Is(err, context.Canceled) {
		return res, err
	}
	s.wake()
	s.log.Warn("state restored from a snapshot file", "jobs", res.Jobs, "nodes", res.Nodes)
	return res, nil
}
