package state

import (
	"errors"
	"math"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/troupe-hpc/troupe/sched/partition"
)

// Usage is the decayed, billed usage of one association (an account and
// a user under it), in TRES-seconds as of the last charge.
type Usage struct {
	Key     string  `json:"key"` // account "/" user
	Account string  `json:"account"`
	User    string  `json:"user"`
	Raw     float64 `json:"raw"`
}

func (u *Usage) key() string { return u.Account + "/" + u.User }

func newUsage(account, user string) *Usage {
	return &Usage{Key: account + "/" + user, Account: account, User: user}
}

// settings is the singleton that holds the partitions config in force
// and the time usage was last charged.
type settings struct {
	ID        string            `json:"id"`
	Config    *partition.Config `json:"config,omitempty"`
	ChargedAt time.Time         `json:"charged_at,omitzero"`
}

const settingsID = "current"

func getSettings(txn *memdb.Txn) settings {
	raw, err := txn.First(tableSettings, "id", settingsID)
	if err != nil {
		panic(err)
	}
	if raw == nil {
		return settings{ID: settingsID}
	}
	return *raw.(*settings)
}

// Config is the partitions config in force: the last one committed, else
// partition.Default().
func (v *Snapshot) Config() *partition.Config {
	if c := getSettings(v.txn).Config; c != nil {
		return c
	}
	return defaultConfig
}

var defaultConfig = partition.Default()

// ChargedAt is when usage was last charged (zero: never).
func (v *Snapshot) ChargedAt() time.Time { return getSettings(v.txn).ChargedAt }

// Usage lists every association's usage, by account then user.
func (v *Snapshot) Usage() []*Usage {
	it, err := v.txn.Get(tableUsage, "id")
	if err != nil {
		panic(err)
	}
	var out []*Usage
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*Usage))
	}
	return out
}

func setConfig(txn *memdb.Txn, c *partition.Config) error {
	if c == nil {
		return errors.New("config command without a config")
	}
	cc := *c
	if err := cc.Prepare(); err != nil {
		return err
	}
	s := getSettings(txn)
	s.Config = &cc
	return txn.Insert(tableSettings, &s)
}

// charge decays every association's usage to now and adds what started
// jobs used since the last charge: each job's billed rate times the time
// it ran in (last, now], weighted by the decay from each moment to now,
// so that the result does not depend on how often the leader charges.
// It reads only the state and now, so every replica computes the same.
func charge(txn *memdb.Txn, now time.Time) error {
	s := getSettings(txn)
	cfg := s.Config
	if cfg == nil {
		cfg = defaultConfig
	}
	last := s.ChargedAt
	if !last.IsZero() && !now.After(last) {
		return nil // an old command replayed, or clocks moved back: nothing to charge
	}
	h := cfg.HalfLife.Seconds()
	decay := func(from time.Time) float64 { // weight of a moment at from, seen at now
		if h == 0 {
			return 1
		}
		return math.Exp2(-now.Sub(from).Seconds() / h)
	}
	add := map[string]*Usage{}
	var order []string
	it, err := txn.Get(tableJobs, "id")
	if err != nil {
		return err
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		j := raw.(*Job)
		if j.Started.IsZero() || j.Array != nil { // an array's elements are charged, not its row
			continue
		}
		end := now
		if j.State.Terminal() {
			if j.Ended.IsZero() {
				continue
			}
			end = j.Ended
		}
		a, b := j.Started, end
		if sp := j.Suspended; sp != nil && sp.Since.Before(b) {
			b = sp.Since // suspended: it uses no CPU from then on
		}
		if a.Before(last) {
			a = last
		}
		if b.After(now) {
			b = now
		}
		if !b.After(a) {
			continue
		}
		var used float64
		if h == 0 {
			used = b.Sub(a).Seconds()
		} else {
			used = h / math.Ln2 * (decay(b) - decay(a))
		}
		u := newUsage(j.Account, j.User)
		if add[u.key()] == nil {
			add[u.key()] = u
			order = append(order, u.key())
		}
		// A QOS's usage_factor scales what its jobs are charged.
		add[u.key()].Raw += used * Billed(cfg.Billing, j) * cfg.QOSByName(j.QOS).Factor()
	}
	if !last.IsZero() {
		f := decay(last)
		for _, u := range snapshotUsage(txn) {
			c := *u
			c.Raw *= f
			if a := add[c.key()]; a != nil {
				c.Raw += a.Raw
				delete(add, c.key())
			}
			if err := txn.Insert(tableUsage, &c); err != nil {
				return err
			}
		}
	}
	for _, k := range order {
		if u := add[k]; u != nil {
			if prev, _ := txn.First(tableUsage, "id", k); prev != nil {
				u.Raw += prev.(*Usage).Raw
			}
			if err := txn.Insert(tableUsage, u); err != nil {
				return err
			}
		}
	}
	s.ChargedAt = now
	return txn.Insert(tableSettings, &s)
}

func snapshotUsage(txn *memdb.Txn) []*Usage {
	it, err := txn.Get(tableUsage, "id")
	if err != nil {
		panic(err)
	}
	var out []*Usage
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*Usage))
	}
	return out
}

// Billed is the billing rate of a job's whole session per second: cores,
// GiB of memory and GPUs of all its containers, weighed by b.
func Billed(b partition.Billing, j *Job) float64 {
	var cpu, mem, gpu float64
	for _, c := range j.Containers {
		cpu += cores(c.CPUMilli)
		mem += float64(c.Memory) / (1 << 30)
		gpu += c.GPU
	}
	return cpu*b.CPU + mem*b.Memory + gpu*b.GPU
}
