// Package fdlimit raises a process's limit of open files to what the
// system allows it. A daemon that holds a connection per node (schedd,
// troupe-nodesim) needs about one file per node, and the usual soft
// limit of 1,024 stops a cluster of a few hundred.
package fdlimit

import "syscall"

// Raise sets the soft limit of open files (RLIMIT_NOFILE) to the hard
// one and returns the limit now in force and the hard one. The Go
// runtime does the same at start on Linux, but gives child processes the
// soft limit it found; a program that raises it itself keeps it for its
// children too.
func Raise() (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, err
	}
	if lim.Cur < lim.Max {
		want := lim
		want.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return lim.Cur, lim.Max, err
		}
		lim = want
	}
	return lim.Cur, lim.Max, nil
}
