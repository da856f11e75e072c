// Package fence keeps a node's containers from outliving its lease.
//
// schedd declares a node DOWN, and requeues its jobs elsewhere, when the
// node has been silent for the node timeout T. Before that moment the
// node's containers must be dead, or a requeued job runs twice at once.
// So every answer schedd gives to a heartbeat carries a lease (T/2): the
// nodelet may run containers until its lease, counted from when it sent
// that heartbeat, runs out. The nodelet writes the lease's deadline to a
// lease file; troupe-fence, a small process of its own (not a thread of
// the nodelet, and in a session of its own), reads it and, once the
// deadline has passed, kills every container of the node. A nodelet that
// is frozen (SIGSTOP, a hung kernel call, a debugger), cut off from
// schedd, or dead cannot renew the file, so its containers die at the
// deadline whatever state the nodelet is in.
//
//	nodelet ── heartbeat ─▶ schedd ── NodeLease{Lease: T/2} ─▶ nodelet
//	nodelet ── writes ─▶ STATE-DIR/lease   (owner, deadline on CLOCK_BOOTTIME)
//	troupe-fence ── reads ─▶ lease; past the deadline: runc kill every
//	                container under the nodelet's runc root, SIGKILL the
//	                nodelet's other children (process runtime)
//
// Deadlines are on CLOCK_BOOTTIME, which keeps counting while the machine
// is suspended: a node that wakes from suspend past its deadline fences
// at once.
//
// The lease file is owned by one nodelet instance (an owner token). A
// nodelet that starts on the same state dir takes the file over, keeping
// the deadline its predecessor held (its re-attached containers stay
// within the lease in force), and starts its own fence; the predecessor's
// fence sees the new owner and exits. A nodelet that stops cleanly (its
// containers destroyed) removes the file, and its fence exits.
//
// It imports no troupe package.
package fence

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// FileName is the lease file's name in the nodelet's state directory.
const FileName = "lease"

// ErrBadLease: a lease file that cannot be read as one. The fence treats
// it as expired.
var ErrBadLease = errors.New("bad lease file")

// Lease is the lease file's content.
type Lease struct {
	// Owner names the nodelet instance that keeps the file.
	Owner string
	// Deadline is when the containers must be dead, on CLOCK_BOOTTIME
	// (Now). Zero: no lease (expired). Unfenced: schedd announced no
	// lease, fencing is off.
	Deadline time.Duration
	Unfenced bool
}

// Expired reports whether the containers must be dead at now.
func (l Lease) Expired(now time.Duration) bool {
	return !l.Unfenced && now >= l.Deadline
}

// Now is CLOCK_BOOTTIME: time since boot, suspend included.
func Now() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic(fmt.Sprintf("clock_gettime(CLOCK_BOOTTIME): %v", err)) // Linux ≥ 2.6.39 has it
	}
	return time.Duration(ts.Nano())
}

const magic = "troupe-lease 1"

// Write replaces the lease file at path with l, atomically (a reader
// sees the old lease or the new one, never a mix).
func Write(path string, l Lease) error {
	if strings.ContainsAny(l.Owner, " \n") || l.Owner == "" {
		return fmt.Errorf("%w: owner %q", ErrBadLease, l.Owner)
	}
	deadline := strconv.FormatInt(int64(l.Deadline), 10)
	if l.Unfenced {
		deadline = "none"
	}
	body := fmt.Sprintf("%s\nowner %s\ndeadline %s\n", magic, l.Owner, deadline)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".lease-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(body); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Read reads the lease file at path. Errors wrap fs.ErrNotExist when it
// is missing, ErrBadLease when it is not a lease file.
func Read(path string) (Lease, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Lease{}, err
	}
	var l Lease
	sc := bufio.NewScanner(bytes.NewReader(b))
	if !sc.Scan() || sc.Text() != magic {
		return Lease{}, fmt.Errorf("%w: %s: does not start with %q", ErrBadLease, path, magic)
	}
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		switch k {
		case "owner":
			l.Owner = v
		case "deadline":
			if v == "none" {
				l.Unfenced = true
				break
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return Lease{}, fmt.Errorf("%w: %s: deadline %q", ErrBadLease, path, v)
			}
			l.Deadline = time.Duration(n)
		}
	}
	if l.Owner == "" {
		return Lease{}, fmt.Errorf("%w: %s: no owner", ErrBadLease, path)
	}
	return l, nil
}
