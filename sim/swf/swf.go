// Package swf reads workload logs in the Standard Workload Format of the
// Parallel Workloads Archive: one job a line, 18 whitespace-separated
// fields, header lines starting with ';'. Plain or gzip input.
//
// The standard library only: no troupe package.
package swf

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ErrFormat marks input that is not SWF.
var ErrFormat = errors.New("not a valid swf line")

// Job is one line. Times are seconds; -1 means unknown, as in the format.
type Job struct {
	ID          int64
	Submit      int64
	Wait        int64
	Run         int64
	Procs       int64 // allocated processors
	CPU         float64
	Mem         float64
	ReqProcs    int64
	ReqTime     int64
	ReqMem      float64
	Status      int64
	User, Group int64
	App         int64
	Queue       int64
	Partition   int64
	Preceding   int64
	ThinkTime   int64
}

// Header is what the ';' lines say that simulators use.
type Header struct {
	MaxProcs int64
	MaxNodes int64
	// Fields holds every "; Key: value" line.
	Fields map[string]string
}

// Log is a whole trace.
type Log struct {
	Header Header
	Jobs   []Job
}

// Open reads the file at path, gunzipping it when it is gzip.
func Open(path string) (*Log, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	l, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// Read parses a trace from r, plain or gzip (sniffed).
func Read(r io.Reader) (*Log, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 1<<16)
	}
	l := &Log{Header: Header{Fields: map[string]string{}}}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		if s[0] == ';' {
			l.Header.parse(s[1:])
			continue
		}
		j, err := parseJob(s)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		l.Jobs = append(l.Jobs, j)
	}
	if err := sc.Err(); err != nil {
		// A truncated gzip stream or an over-long line: no partial log.
		return nil, fmt.Errorf("after line %d: reading the trace: %w", line, err)
	}
	return l, nil
}

func (h *Header) parse(s string) {
	k, v, ok := strings.Cut(s, ":")
	if !ok {
		return
	}
	k, v = strings.TrimSpace(k), strings.TrimSpace(v)
	h.Fields[k] = v
	n, err := strconv.ParseInt(strings.Fields(v + " x")[0], 10, 64)
	if err != nil {
		return
	}
	switch k {
	case "MaxProcs":
		h.MaxProcs = n
	case "MaxNodes":
		h.MaxNodes = n
	}
}

func parseJob(s string) (Job, error) {
	f := strings.Fields(s)
	if len(f) < 18 {
		return Job{}, fmt.Errorf("%w: %d fields, want 18", ErrFormat, len(f))
	}
	var nums [18]float64
	for i := 0; i < 18; i++ {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return Job{}, fmt.Errorf("%w: field %d %q", ErrFormat, i+1, f[i])
		}
		nums[i] = v
	}
	in := func(i int) int64 { return int64(nums[i]) }
	return Job{
		ID: in(0), Submit: in(1), Wait: in(2), Run: in(3), Procs: in(4), CPU: nums[5], Mem: nums[6],
		ReqProcs: in(7), ReqTime: in(8), ReqMem: nums[9], Status: in(10), User: in(11), Group: in(12),
		App: in(13), Queue: in(14), Partition: in(15), Preceding: in(16), ThinkTime: in(17),
	}, nil
}
