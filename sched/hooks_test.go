package sched

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/eventually"
)

// setHook sets one of the package's test hooks (testhooks.go) until the
// test ends.
func setHook[F any](t *testing.T, h *atomic.Pointer[F], f F) {
	t.Helper()
	if !h.CompareAndSwap(nil, &f) {
		t.Fatal("a test hook is already set: an earlier test did not clear it")
	}
	t.Cleanup(func() { h.Store(nil) })
}

// gate holds a group commit's entries as a test says: gateCommits
// wraps the group's commit once, and set chooses what runs before each
// entry is proposed, with the number of calls it carries (nil: nothing).
type gate struct{ fn atomic.Pointer[func(n int)] }

func (g *gate) set(fn func(n int)) {
	if fn == nil {
		g.fn.Store(nil)
		return
	}
	g.fn.Store(&fn)
}

// gateCommits wraps g's commit with a gate. It waits for g to be idle
// (no committer running) so that the next committer, started by a call
// under g's lock, is the first to see the wrapped commit.
func gateCommits[In, Out any](t *testing.T, g *groupCommit[In, Out]) *gate {
	t.Helper()
	gt := &gate{}
	eventually.True(t, 10*time.Second, "the group commit idle, to gate it", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.busy {
			return false
		}
		commit := g.commit
		g.commit = func(ins []In) ([]Out, error) {
			if fn := gt.fn.Load(); fn != nil {
				(*fn)(len(ins))
			}
			return commit(ins)
		}
		return true
	})
	return gt
}
