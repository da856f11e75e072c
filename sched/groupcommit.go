package sched

import "sync"

// groupCommit gathers writes into raft entries: the calls that arrive
// while one entry is being committed go out together in the next one. A
// call on an idle log is committed at once (no timer, no added latency);
// under load an entry carries every call that arrived during the previous
// commit (up to maxItems, and no more once maxWeight is reached), so the
// number of entries follows the commit rate, not the call rate. Nodelet
// reports and single submits go through one each.
type groupCommit[In, Out any] struct {
	// commit proposes ins as one entry and answers each, in order; an
	// error answers every call in the entry with it.
	commit func(ins []In) ([]Out, error)
	// maxItems bounds the calls of one entry; maxWeight, when set with
	// weight, stops adding calls once their weights reach it (an entry
	// takes at least one call, whatever its weight).
	maxItems  int
	maxWeight int
	weight    func(In) int

	mu      sync.Mutex
	waiting []*commitCall[In, Out]
	busy    bool // a committer goroutine runs
}

// commitCall is one call waiting for its entry to commit.
type commitCall[In, Out any] struct {
	in   In
	done chan commitOutcome[Out] // buffered 1: the committer never blocks
}

type commitOutcome[Out any] struct {
	out Out
	err error
}

// do commits in with whatever else is waiting and returns its answer once
// the entry carrying it is committed (durable, applied) or refused. Calls
// keep their order: two calls of one caller go out in the order made.
func (g *groupCommit[In, Out]) do(in In) (Out, error) {
	call := &commitCall[In, Out]{in: in, done: make(chan commitOutcome[Out], 1)}
	g.mu.Lock()
	g.waiting = append(g.waiting, call)
	if !g.busy {
		g.busy = true
		go g.run()
	}
	g.mu.Unlock()
	// The committer answers every call it takes once raft has answered
	// the entry (committed, refused, or leadership lost); waiting for it
	// rather than for a context keeps the answer true: a write is
	// acknowledged only once committed.
	o := <-call.done
	return o.out, o.err
}

// run commits the waiting calls, an entry at a time, until none waits.
func (g *groupCommit[In, Out]) run() {
	for {
		g.mu.Lock()
		n, w := 0, 0
		for n < len(g.waiting) && n < g.maxItems && (n == 0 || g.weight == nil || w < g.maxWeight) {
			if g.weight != nil {
				w += g.weight(g.waiting[n].in)
			}
			n++
		}
		if n == 0 {
			g.busy = false
			g.mu.Unlock()
			return
		}
		batch := append([]*commitCall[In, Out](nil), g.waiting[:n]...)
		g.waiting = append(g.waiting[:0], g.waiting[n:]...)
		g.mu.Unlock()
		ins := make([]In, len(batch))
		for i, c := range batch {
			ins[i] = c.in
		}
		outs, err := g.commit(ins)
		if err == nil && len(outs) != len(batch) {
			panic("groupCommit: commit answered a different number of calls") // a bug in commit
		}
		for i, c := range batch {
			if err != nil {
				c.done <- commitOutcome[Out]{err: err}
				continue
			}
			c.done <- commitOutcome[Out]{out: outs[i]}
		}
	}
}
