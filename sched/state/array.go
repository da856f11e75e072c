package state

import (
	"encoding/binary"
	"fmt"
	"github.com/troupe-hpc/troupe/internal/arrayindex"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-memdb"

	"github.com/troupe-hpc/troupe/internal/lifecycle"
	"github.com/troupe-hpc/troupe/internal/reason"
)

// Job arrays. An array is one row, the array's own (Job.Array), made
// by one submit command whatever its size. Its elements get rows of
// their own, ordinary jobs the scheduler places with fair share, only as
// they come up: settleArrays, run at the end of every command that
// changes jobs, keeps up to ArrayWindow element rows PENDING per array
// (fewer when max_running allows fewer to start), in index order, and
// keeps the array's counts and state in step with its elements'. So an
// array of 100,000 costs one row and one log entry at submit, and the
// state holds rows only for elements that are pending in the window,
// running, or ended and not yet purged to the accounting store.
//
// Everything here is a function of the command and the state: element
// ids come from the job counter, their kernel ids from the array's
// session id and the index (uuid.NewSHA1), so every replica makes the
// same rows.

// ArrayWindow is how many element rows of one array may wait PENDING at
// once: enough to fill a pass of the scheduler, few enough that a huge
// array does not grow the queue.
const ArrayWindow = 128

// elementIndex is the jobs table's index of elements by array id and
// index; with one argument (the array id) as a prefix it lists the
// array's elements in index order.
type elementIndex struct{}

func elementKey(array uint64, index int) []byte {
	b := make([]byte, 12)
	binary.BigEndian.PutUint64(b, array)
	binary.BigEndian.PutUint32(b[8:], uint32(index))
	return b
}

func (elementIndex) FromObject(raw any) (bool, []byte, error) {
	j := raw.(*Job)
	if j.ArrayID == 0 {
		return false, nil, nil
	}
	return true, elementKey(j.ArrayID, j.ArrayIndex), nil
}

func (elementIndex) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("element index wants (array id, index), got %d arguments", len(args))
	}
	id, ok1 := args[0].(uint64)
	idx, ok2 := args[1].(int)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("element index wants (uint64, int), got (%T, %T)", args[0], args[1])
	}
	return elementKey(id, idx), nil
}

func (elementIndex) PrefixFromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("element prefix wants an array id, got %d arguments", len(args))
	}
	id, ok := args[0].(uint64)
	if !ok {
		return nil, fmt.Errorf("element prefix wants a uint64, got %T", args[0])
	}
	return binary.BigEndian.AppendUint64(nil, id), nil
}

// newArray makes j (a submission whose spec has an array) an array's
// own row: no element has a row yet.
func newArray(j *Job) error {
	x, _, err := arrayindex.Parse(j.Spec.Array.Range)
	if err != nil {
		return err
	}
	held := j.State == lifecycle.JobHeld
	a := &Array{Indices: x, Count: x.Count(), MaxRunning: j.Spec.Array.MaxRunning, Held: held,
		States: map[lifecycle.JobState]int{lifecycle.JobPending: x.Count()}}
	if held {
		a.States = map[lifecycle.JobState]int{lifecycle.JobHeld: a.Count}
	}
	j.Array = a
	return nil
}

func unmade(a *Array) int { return a.Unmade() }

// element returns the row of element idx of array id, or nil.
func element(txn *memdb.Txn, id uint64, idx int) (*Job, error) {
	raw, err := txn.First(tableJobs, "element", id, idx)
	if err != nil || raw == nil {
		return nil, err
	}
	return clone(raw.(*Job)), nil
}

// elements returns the rows of array id's elements, in index order.
func elements(txn *memdb.Txn, id uint64) ([]*Job, error) {
	return jobsBy(txn, "element_prefix", id)
}

// makeElement inserts element idx of array p with a fresh id, in state
// st (PENDING or HELD). The caller accounts for it in p's counts.
func makeElement(txn *memdb.Txn, index uint64, p *Job, idx int, st lifecycle.JobState) (*Job, error) {
	last, err := lastJobID(txn)
	if err != nil {
		return nil, err
	}
	e := clone(p)
	e.ID, e.RequestID, e.Array = last+1, "", nil
	e.ArrayID, e.ArrayIndex = p.ID, idx
	a := p.Array
	e.ArraySpan = &ArraySpan{Min: a.Indices.Min(), Max: a.Indices.Max(), Count: a.Count, Step: a.Indices.Step()}
	e.State, e.Reason, e.ModifyIndex = st, reason.Waiting(st == lifecycle.JobHeld, e.DependsOn != nil, false), index
	e.Started, e.Ended, e.ExitCode = time.Time{}, time.Time{}, 0
	e.KillWanted, e.Cancelled, e.KillDone, e.TimedOut = false, false, false, false
	ns, err := uuid.Parse(p.SessionID)
	if err != nil {
		ns = uuid.NameSpaceOID
	}
	for i := range e.Containers {
		c := &e.Containers[i]
		c.KernelID = uuid.NewSHA1(ns, fmt.Appendf(nil, "%d/%s", idx, c.Host)).String()
		c.Node, c.NodeAddr, c.Reach, c.State, c.ExitCode, c.Message, c.GPUs = "", "", "", lifecycle.ContainerPending, 0, "", nil
		c.CPUTime, c.MemPeak = 0, 0
	}
	e.SessionID = e.Containers[0].KernelID
	sessionNetwork(e)
	return e, txn.Insert(tableJobs, e)
}

// elementForCommand is the row of element idx of array p for a kill,
// hold or release that names it, making the row now (PENDING, or HELD
// in a held array) if the element has none yet; p's counts move with
// the row (settleArrays sees a new row as an unmade element's).
func elementForCommand(txn *memdb.Txn, index uint64, p *Job, idx int) (*Job, error) {
	a := p.Array
	e, err := element(txn, p.ID, idx)
	if err != nil || e != nil {
		return e, err
	}
	pos := a.Indices.Position(idx)
	switch {
	case pos < 0:
		return nil, fmt.Errorf("job %d[%d]: array %d has no element %d (its indices: %s): %w", p.ID, idx, p.ID, idx, a.Indices, ErrNotFound)
	case pos < a.Next:
		return nil, fmt.Errorf("job %d[%d]: %w (its record is in the accounting store; see bhist)", p.ID, idx, ErrEnded)
	}
	st := lifecycle.JobPending
	if a.Held {
		st = lifecycle.JobHeld
	}
	// The row is made in the unmade element's state: no count moves.
	p = clone(p)
	na := *a
	na.Early = append(slices.Clone(a.Early), idx)
	slices.Sort(na.Early)
	p.Array = &na
	if err := txn.Insert(tableJobs, p); err != nil {
		return nil, err
	}
	if _, err := makeElement(txn, index, p, idx, st); err != nil {
		return nil, err
	}
	return element(txn, p.ID, idx)
}

// settleArrays brings the arrays that the command touched (their own
// rows, or their elements') up to date: counts by state, new element
// rows up to the window and the throttle (none while hold: the adoption
// window after a restore, adoptarray.go), and the derived state.
func settleArrays(txn *memdb.Txn, index uint64, now time.Time, hold bool) error {
	arrays := map[uint64]*Job{}
	var order []uint64
	get := func(id uint64) *Job {
		if p, ok := arrays[id]; ok {
			return p
		}
		raw, _ := txn.First(tableJobs, "id", id)
		var p *Job
		if raw != nil && raw.(*Job).Array != nil {
			p = clone(raw.(*Job))
			a := *p.Array
			a.States = maps.Clone(a.States)
			p.Array = &a
		}
		arrays[id] = p
		order = append(order, id)
		return p
	}
	for _, ch := range txn.Changes() {
		if ch.Table != tableJobs || ch.After == nil {
			continue // a purge: the counts keep the element's end
		}
		after := ch.After.(*Job)
		if after.Array != nil {
			get(after.ID)
			continue
		}
		if after.ArrayID == 0 {
			continue
		}
		p := get(after.ArrayID)
		if p == nil {
			continue // the array's row was purged first (a restore)
		}
		before := lifecycle.JobPending // an unmade element
		if p.Array.Held {
			before = lifecycle.JobHeld
		}
		if ch.Before != nil {
			before = ch.Before.(*Job).State
		}
		p.Array.States[before]--
		p.Array.States[after.State]++
	}
	slices.Sort(order)
	for _, id := range order {
		p := arrays[id]
		if p == nil {
			continue
		}
		if hold {
			// no new element rows in the adoption window
		} else if err := refill(txn, index, p); err != nil {
			return err
		}
		for s, n := range p.Array.States {
			if n == 0 {
				delete(p.Array.States, s)
			}
		}
		deriveArrayState(p, now)
		p.ModifyIndex = index
		if err := txn.Insert(tableJobs, p); err != nil {
			return err
		}
	}
	return nil
}

// refill gives rows to the next unmade elements of p, in index order,
// while fewer than ArrayWindow element rows wait PENDING and the
// started and pending elements stay within max_running.
func refill(txn *memdb.Txn, index uint64, p *Job) error {
	a := p.Array
	if a.Held || p.Cancelled || p.State.Terminal() {
		return nil
	}
	pending := a.States[lifecycle.JobPending] - unmade(a) // with rows
	want := ArrayWindow - pending
	if a.MaxRunning > 0 {
		want = min(want, a.MaxRunning-a.Started()-pending)
	}
	for ; want > 0 && a.Next < a.Count; a.Next++ {
		idx := a.Indices.At(a.Next)
		if k, early := slices.BinarySearch(a.Early, idx); early {
			a.Early = slices.Delete(slices.Clone(a.Early), k, k+1)
			continue
		}
		if _, err := makeElement(txn, index, p, idx, lifecycle.JobPending); err != nil {
			return err
		}
		want--
	}
	return nil
}

// deriveArrayState sets p's state from its counts (see Array).
func deriveArrayState(p *Job, now time.Time) {
	a := p.Array
	was := p.State
	switch {
	case a.Ended() == a.Count:
		switch {
		case a.States[lifecycle.JobCompleted] == a.Count:
			p.State, p.ExitCode = lifecycle.JobCompleted, 0
		case p.Cancelled:
			p.State = lifecycle.JobCancelled
		default:
			p.State, p.ExitCode = lifecycle.JobFailed, 1
		}
		p.Reason = ""
		if !was.Terminal() {
			p.Ended = now
		}
	case a.Started() > 0:
		p.State, p.Reason = lifecycle.JobRunning, ""
	case a.Held || a.States[lifecycle.JobPending] == 0:
		p.State, p.Reason = lifecycle.JobHeld, reason.Held
	default:
		p.State = lifecycle.JobPending
		if p.Reason == reason.Held || p.Reason == "" {
			p.Reason = reason.Priority
		}
	}
	if p.State == lifecycle.JobRunning && p.Started.IsZero() {
		p.Started = now
	}
}

// killArray cancels the whole array p: every element with a row that has
// not ended is killed as a job is, the elements without one end at once.
func killArray(txn *memdb.Txn, index uint64, now time.Time, p *Job, done bool) (*Job, error) {
	p.Cancelled, p.ModifyIndex = true, index
	p.KillDone = p.KillDone || done
	a := *p.Array
	a.States = maps.Clone(a.States)
	end := lifecycle.JobCancelled
	if done {
		end = lifecycle.JobCompleted
	}
	n := unmade(&a)
	from := lifecycle.JobPending
	if a.Held {
		from = lifecycle.JobHeld
	}
	a.States[from] -= n
	a.States[end] += n
	a.Next, a.Early = a.Count, nil
	p.Array = &a
	if err := txn.Insert(tableJobs, p); err != nil {
		return nil, err
	}
	es, err := elements(txn, p.ID)
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		if e.State.Terminal() {
			continue
		}
		if _, err := kill(txn, index, now, e.ID, done); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// holdArray holds the whole array p: its pending elements become HELD
// and no more get rows until it is released; started ones go on.
func holdArray(txn *memdb.Txn, index uint64, p *Job, on bool) (*Job, error) {
	a := *p.Array
	a.States = maps.Clone(a.States)
	switch {
	case on && a.Held:
		return nil, conflict("job %d is already held", p.ID)
	case !on && !a.Held && a.States[lifecycle.JobHeld] == 0:
		return nil, conflict("job %d is %s: no element of it is held", p.ID, p.State)
	}
	n := unmade(&a)
	if on {
		a.States[lifecycle.JobPending] -= n
		a.States[lifecycle.JobHeld] += n
	} else if a.Held {
		a.States[lifecycle.JobHeld] -= n
		a.States[lifecycle.JobPending] += n
	}
	a.Held = on
	p.Array, p.ModifyIndex = &a, index
	if err := txn.Insert(tableJobs, p); err != nil {
		return nil, err
	}
	es, err := elements(txn, p.ID)
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		var err error
		switch {
		case on && e.State == lifecycle.JobPending:
			_, err = hold(txn, index, e.ID)
		case !on && e.State == lifecycle.JobHeld:
			_, err = release(txn, index, e.ID)
		}
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Element returns the row of element idx of array id, or nil (not made
// yet, purged, or no such element).
func (v *jobReads) Element(id uint64, idx int) *Job {
	raw, err := v.txn.First(tableJobs, "element", id, idx)
	if err != nil {
		panic(err)
	}
	if raw == nil {
		return nil
	}
	return raw.(*Job)
}

// Elements returns the rows of array id's elements, in index order.
func (v *jobReads) Elements(id uint64) []*Job {
	es, err := elements(v.txn, id)
	if err != nil {
		panic(err)
	}
	return es
}

// ElementView is element idx of array p as an answer shows it: its row
// when it has one, else the array's settings in the state an element
// without a row is in (PENDING, HELD, or ended with the array). ok is
// false when p has no such element, or its row was purged.
func (v *jobReads) ElementView(p *Job, idx int) (j *Job, ok bool) {
	a := p.Array
	if a == nil || a.Indices.Position(idx) < 0 {
		return nil, false
	}
	if e := v.Element(p.ID, idx); e != nil {
		return e, true
	}
	pos := a.Indices.Position(idx)
	if pos < a.Next && !p.Cancelled || slices.Contains(a.Early, idx) {
		return nil, false // ended, and purged to the accounting store
	}
	e := clone(p)
	e.ID, e.Array, e.ArrayID, e.ArrayIndex = 0, nil, p.ID, idx
	e.SessionID, e.Network = "", nil // it has no session yet
	for i := range e.Containers {
		e.Containers[i].KernelID, e.Containers[i].Addr = "", ""
	}
	e.ArraySpan = &ArraySpan{Min: a.Indices.Min(), Max: a.Indices.Max(), Count: a.Count, Step: a.Indices.Step()}
	e.Started, e.Ended = time.Time{}, time.Time{}
	switch {
	case pos < a.Next: // killed with the array before its turn
		e.State, e.Reason, e.Ended = finalStateOfQueued(p), "", p.Ended
	case a.Held:
		e.State, e.Reason = lifecycle.JobHeld, reason.Waiting(true, false, false)
	default:
		e.State, e.Reason = lifecycle.JobPending, reason.Waiting(false, false, a.MaxRunning > 0 && a.Started() >= a.MaxRunning)
	}
	return e, true
}
