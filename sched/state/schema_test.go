package state

import (
	"errors"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestOlderSchemaEntries: in a cluster in the middle of a rolling
// upgrade the leader writes the previous release's schema, and every
// peer, old or new, must apply such an entry alike: its sender (By),
// which the previous release does not know, is ignored, so a request id
// reused by another user is refused as that release refuses it.
func TestOlderSchemaEntries(t *testing.T) {
	h := newHarness(t)
	a := h.apply(Command{Kind: CmdSubmit, Submit: session(1)}).(uint64)
	b := h.apply(Command{Kind: CmdSubmit, Submit: session(1)}).(uint64)
	h.apply(Command{Version: OldestSchema, Kind: CmdHold, Hold: a, Request: "r", By: "alice"})
	h.idx++
	_, err := h.st.Apply(h.idx, Command{Version: OldestSchema, Kind: CmdHold, Hold: b, Request: "r", By: "bob", Time: t0})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("bob's hold with alice's request id in a schema %d entry: %v, want the conflict the previous release answers", OldestSchema, err)
	}
	if h.job(b).State != api.JobPending {
		t.Fatalf("job %d is %s, want PENDING", b, h.job(b).State)
	}
	// A schema 7 entry knows the sender.
	if theirs := h.apply(Command{Kind: CmdHold, Hold: b, Request: "r", By: "bob"}).(*Job); theirs.ID != b {
		t.Fatalf("bob's hold answered job %d", theirs.ID)
	}
}

// TestSchemaInForce: the state is in the highest schema of what it
// applied (OldestSchema at the least), its dumps carry it, and a
// restore puts it in the dump's.
func TestSchemaInForce(t *testing.T) {
	st := New()
	if v := st.Snapshot().Schema(); v != OldestSchema {
		t.Fatalf("a new state is in schema %d, want %d", v, OldestSchema)
	}
	if _, err := st.Apply(1, Command{Version: OldestSchema, Kind: CmdTouch}); err != nil {
		t.Fatal(err)
	}
	old := st.Snapshot().Dump()
	if old.Version != OldestSchema {
		t.Fatalf("dump after a schema %d entry carries %d", OldestSchema, old.Version)
	}
	// Refused or not, an entry's schema is in the log.
	if _, err := st.Apply(2, Command{Version: SchemaVersion, Kind: CmdKill, Kill: 99}); err == nil {
		t.Fatal("kill of a job that does not exist applied")
	}
	if _, err := st.Apply(3, Command{Version: OldestSchema, Kind: CmdTouch}); err != nil {
		t.Fatal(err)
	}
	if v, d := st.Snapshot().Schema(), st.Snapshot().Dump().Version; v != SchemaVersion || d != SchemaVersion {
		t.Fatalf("after a schema %d entry: schema %d, dump %d", SchemaVersion, v, d)
	}
	if err := st.Restore(old); err != nil {
		t.Fatal(err)
	}
	if v := st.Snapshot().Schema(); v != OldestSchema {
		t.Fatalf("after restoring a schema %d dump: %d", OldestSchema, v)
	}
	if err := st.Restore(Dump{Version: 2}); err != nil {
		t.Fatal(err)
	}
	if v := st.Snapshot().Schema(); v != OldestSchema {
		t.Fatalf("after restoring a schema 2 dump: %d, want %d (never older than what this release writes)", v, OldestSchema)
	}
}
