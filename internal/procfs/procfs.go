// Package procfs reads proc(5)'s /proc/PID/stat, the one place troupe
// parses it: the nodelet's fence and runtimes walk process trees and
// groups with it, the device-host records check their owner's start
// time, and the metrics read the process's own CPU time and memory.
//
// A stat line is "PID (COMMAND) STATE PPID PGRP … ": the command may hold
// spaces and parentheses, so the fields are counted from the last ')'.
package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// ErrStat is the refusal of a stat line that is not proc(5)'s.
var ErrStat = errors.New("procfs: not a /proc/PID/stat line")

// Stat is what troupe uses of one process's /proc/PID/stat, by proc(5)'s
// field numbers.
type Stat struct {
	PID   int  // field 1
	State byte // field 3: R, S, D, T, Z (zombie), X (dead)…
	PPID  int  // field 4
	PGRP  int  // field 5: the process group
	// UTime and STime (fields 14 and 15) are the CPU time spent in user
	// and kernel mode, in clock ticks (USER_HZ).
	UTime, STime uint64
	StartTime    uint64 // field 22: the start, in clock ticks since boot
	VSize        uint64 // field 23: virtual memory, in bytes
	RSS          uint64 // field 24: resident memory, in pages
}

// Live reports whether the process still runs: neither a zombie (exited,
// not yet reaped) nor dead.
func (s Stat) Live() bool { return s.State != 'Z' && s.State != 'X' }

// Parse reads one /proc/PID/stat line.
func Parse(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	j := bytes.IndexByte(b, ' ')
	if i < 0 || j < 0 || j > i {
		return Stat{}, fmt.Errorf("%w: no \"PID (COMMAND)\"", ErrStat)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 22 {
		return Stat{}, fmt.Errorf("%w: %d fields, want at least 24", ErrStat, len(f)+2)
	}
	var s Stat
	pid, err := strconv.Atoi(string(b[:j]))
	if err != nil {
		return Stat{}, fmt.Errorf("%w: field 1: %w", ErrStat, err)
	}
	s.PID = pid
	if len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("%w: field 3: state %q is not one letter", ErrStat, f[0])
	}
	s.State = f[0][0]
	for _, x := range []struct {
		field int
		v     *int
	}{{4, &s.PPID}, {5, &s.PGRP}} {
		n, err := strconv.Atoi(string(f[x.field-3]))
		if err != nil {
			return Stat{}, fmt.Errorf("%w: field %d: %w", ErrStat, x.field, err)
		}
		*x.v = n
	}
	for _, x := range []struct {
		field int
		v     *uint64
	}{{14, &s.UTime}, {15, &s.STime}, {22, &s.StartTime}, {23, &s.VSize}, {24, &s.RSS}} {
		n, err := strconv.ParseUint(string(f[x.field-3]), 10, 64)
		if err != nil {
			return Stat{}, fmt.Errorf("%w: field %d: %w", ErrStat, x.field, err)
		}
		*x.v = n
	}
	return s, nil
}

// Read reads process pid's stat; an absent process is an error wrapping
// os.ErrNotExist.
func Read(pid int) (Stat, error) {
	return read(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
}

// Self reads the calling process's stat.
func Self() (Stat, error) { return read("/proc/self/stat") }

func read(path string) (Stat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Stat{}, err
	}
	s, err := Parse(b)
	if err != nil {
		return Stat{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// All reads every process's stat; a process that exits while the list is
// read, or whose line cannot be read, is left out.
func All() []Stat {
	ents, _ := os.ReadDir("/proc")
	out := make([]Stat, 0, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, err := Read(pid); err == nil {
			out = append(out, s)
		}
	}
	return out
}

// Descendants lists the live descendants of pid, children before their
// own children, leaving out the subtree of skip (0 skips nothing).
func Descendants(pid, skip int) []int {
	children := map[int][]Stat{}
	for _, s := range All() {
		children[s.PPID] = append(children[s.PPID], s)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if c.PID == skip {
				continue
			}
			if c.Live() {
				out = append(out, c.PID)
			}
			queue = append(queue, c.PID)
		}
	}
	return out
}

// GroupAlive reports whether a live process of process group pgrp
// exists.
func GroupAlive(pgrp int) bool {
	for _, s := range All() {
		if s.PGRP == pgrp && s.Live() {
			return true
		}
	}
	return false
}
