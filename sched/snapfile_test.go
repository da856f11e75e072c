package sched

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
)

// TestSnapshotSaveRestore saves a snapshot through the API, changes the
// state, refuses damaged copies (state untouched) and restores the good
// one.
func TestSnapshotSaveRestore(t *testing.T) {
	srv, c := cluster(t)
	ctx := context.Background()
	register(t, c, "n1", 4)
	var ids []uint64
	for range 3 {
		res, err := c.Submit(ctx, api.SubmitRequest{Spec: spec(1, "single-node", 1), User: "u", UID: 1000, GID: 1000})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.JobID)
	}
	var file bytes.Buffer
	if err := c.SaveSnapshot(ctx, &file); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(file.String(), "troupe-snapshot/1 ") {
		t.Fatalf("snapshot starts %q", file.String()[:40])
	}
	// Change the state after the save: a fourth job, a killed one.
	if _, err := c.Submit(ctx, api.SubmitRequest{Spec: spec(1, "single-node", 1), User: "u", UID: 1000, GID: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kill(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	live := len(srv.Store().Snapshot().Jobs())

	good := file.Bytes()
	nl := bytes.IndexByte(good, '\n')
	flip := bytes.Clone(good)
	flip[nl+10] ^= 0x20
	cases := map[string][]byte{
		"one bit flipped": flip,
		"truncated":       good[:len(good)-5],
		"padded":          append(bytes.Clone(good), '\n'),
		"no header":       good[nl+1:],
		"empty":           nil,
		"bad checksum":    bytes.Replace(bytes.Clone(good), []byte("sha256="), []byte("sha256=00"), 1),
	}
	for name, b := range cases {
		_, err := c.RestoreSnapshot(ctx, bytes.NewReader(b))
		var ae *client.APIError
		if err == nil || !strings.Contains(err.Error(), "snapshot file refused") || !asAPI(err, &ae) || ae.Status != 400 {
			t.Errorf("%s: got %v, want a 400 refusal", name, err)
		}
		if n := len(srv.Store().Snapshot().Jobs()); n != live {
			t.Fatalf("%s: the refused restore changed the state: %d jobs, want %d", name, n, live)
		}
	}
	res, err := c.RestoreSnapshot(ctx, bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if res.Jobs != 3 {
		t.Fatalf("restored %d jobs, want 3", res.Jobs)
	}
	v := srv.Store().Snapshot()
	if n := len(v.Jobs()); n != 3 {
		t.Fatalf("after restore: %d jobs, want 3", n)
	}
	if j := v.Job(ids[0]); j.State == api.JobCancelled {
		t.Fatalf("job %d is still cancelled after restoring a snapshot from before the kill", ids[0])
	}
	// The state goes on: a new submit takes the next id.
	r, err := c.Submit(ctx, api.SubmitRequest{Spec: spec(1, "single-node", 1), User: "u", UID: 1000, GID: 1000})
	if err != nil || r.JobID != 4 {
		t.Fatalf("submit after restore: id %d, %v; want 4", r.JobID, err)
	}
}
