package state

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
)

// A raft snapshot is one JSON object, the Dump, whose jobs are nearly all
// of it: a million jobs make a gigabyte of text. WriteDump and ReadDump
// move it a job at a time, so that neither holds the whole text in
// memory (json's Encoder and Decoder each would, beside the rows), and
// ReadDump decodes the jobs on every core. The text is the one
// Dump.MarshalJSON writes, and ReadDump reads what any schema wrote.

// dumpChunk is how many jobs one decoding worker takes at a time.
const dumpChunk = 256

// jobsNull is where the jobs go in the rest of a dump marshaled without
// them.
var jobsNull = []byte(`"jobs":null`)

// WriteDump writes d as Dump.MarshalJSON does, a job at a time, followed
// by a newline.
func WriteDump(w io.Writer, d Dump) error {
	if d.Version < rowSchema {
		// An older schema's rows are written in their form: a small
		// cluster's, being upgraded.
		return json.NewEncoder(w).Encode(d)
	}
	type plain Dump
	rest := plain(d)
	rest.Jobs = nil
	tail, err := json.Marshal(rest)
	if err != nil {
		return err
	}
	at := bytes.Index(tail, jobsNull)
	if at < 0 {
		return errors.New("writing a dump: its jobs have no place in it") // a bug
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	bw.Write(tail[:at])
	bw.WriteString(`"jobs":`)
	if d.Jobs == nil {
		bw.WriteString("null")
	} else {
		bw.WriteByte('[')
		enc := json.NewEncoder(bw)
		for i, j := range d.Jobs {
			if i > 0 {
				bw.WriteByte(',')
			}
			// Encode ends each with a newline, which JSON reads as
			// space between the array's values.
			if err := enc.Encode(j); err != nil {
				return fmt.Errorf("writing job %d of a dump: %w", j.ID, err)
			}
		}
		bw.WriteByte(']')
	}
	bw.Write(tail[at+len(jobsNull):])
	bw.WriteByte('\n')
	return bw.Flush()
}

// ReadDump reads one dump from r, as Dump.MarshalJSON or WriteDump wrote
// it in any schema, decoding its jobs as they come on every core. Fields
// it does not know are skipped, as json.Unmarshal skips them.
func ReadDump(r io.Reader) (Dump, error) { return readDump(r, nil) }

// readDump is ReadDump, giving sink the jobs (readJobs).
func readDump(r io.Reader, sink func([]*Job) error) (Dump, error) {
	var (
		rest  bytes.Buffer // the other fields, an object of their own
		jobs  []*Job
		found bool
		src   = r
	)
	rest.WriteByte('{')
	for {
		dec := json.NewDecoder(src)
		if err := delim(dec, '{'); err != nil {
			return Dump{}, err
		}
		more, closed := false, false
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return Dump{}, err
			}
			key, _ := tok.(string)
			if key == "jobs" {
				// The jobs are read straight from the text after the key,
				// a job at a time (readJobs); what follows them, if
				// more fields, is read as an object of its own.
				br := bufio.NewReaderSize(io.MultiReader(dec.Buffered(), src), 1<<16)
				if jobs, err = readJobs(br, sink); err != nil {
					return Dump{}, err
				}
				found = true
				c, err := nextByte(br)
				if err != nil {
					return Dump{}, fmt.Errorf("reading a dump after its jobs: %w", err)
				}
				switch c {
				case '}':
					closed = true
				case ',':
					src, more = io.MultiReader(strings.NewReader("{"), br), true
				default:
					return Dump{}, fmt.Errorf("reading a dump: %q after its jobs", c)
				}
				break
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return Dump{}, err
			}
			if rest.Len() > 1 {
				rest.WriteByte(',')
			}
			k, _ := json.Marshal(key)
			rest.Write(k)
			rest.WriteByte(':')
			rest.Write(raw)
		}
		if more {
			continue
		}
		if !closed {
			if err := delim(dec, '}'); err != nil {
				return Dump{}, err
			}
		}
		break
	}
	rest.WriteByte('}')
	var d Dump
	if err := json.Unmarshal(rest.Bytes(), &d); err != nil {
		return Dump{}, err
	}
	if found {
		d.Jobs, d.shared = jobs, true
	}
	return d, nil
}

// nextByte is the next byte of br that is not JSON's space.
func nextByte(br *bufio.Reader) (byte, error) {
	for {
		c, err := br.ReadByte()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return c, nil
		}
	}
}

// readObject appends to out the JSON object br is at, its '{' read
// already, up to its closing '}': the bounds of one job, found by
// counting brackets outside strings. Whether the text between is JSON
// is left to its decoding.
func readObject(br *bufio.Reader, out []byte) ([]byte, error) {
	depth, inString, escaped := 1, false, false
	out = append(out, '{')
	for {
		if _, err := br.Peek(1); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		buf, _ := br.Peek(br.Buffered())
		for i, c := range buf {
			switch {
			case inString:
				switch {
				case escaped:
					escaped = false
				case c == '\\':
					escaped = true
				case c == '"':
					inString = false
				}
			case c == '"':
				inString = true
			case c == '{' || c == '[':
				depth++
			case c == '}' || c == ']':
				if depth--; depth == 0 {
					out = append(out, buf[:i+1]...)
					_, _ = br.Discard(i + 1)
					return out, nil
				}
			}
		}
		out = append(out, buf...)
		_, _ = br.Discard(len(buf))
	}
}

// delim reads the delimiter want.
func delim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("reading a dump: %v where %q belongs", tok, want)
	}
	return nil
}

// readJobs reads the dump's jobs array (or null), handing chunks of
// them to as many workers as there are cores to decode, and returns
// them in order; sink, if not nil, is given each chunk in order as soon
// as it is decoded (on a goroutine of its own, one chunk at a time).
func readJobs(br *bufio.Reader, sink func([]*Job) error) ([]*Job, error) {
	if c, err := nextByte(br); err != nil || c != ':' {
		return nil, fmt.Errorf("reading a dump: no ':' after \"jobs\" (%q, %v)", c, err)
	}
	c, err := nextByte(br)
	if err != nil {
		return nil, err
	}
	switch c {
	case 'n':
		if rest := make([]byte, 3); func() bool { _, err := io.ReadFull(br, rest); return err != nil }() || string(rest) != "ull" {
			return nil, errors.New("reading a dump: its jobs are neither an array nor null")
		}
		return nil, nil
	case '[':
	default:
		return nil, fmt.Errorf("reading a dump: its jobs begin with %q, not an array", c)
	}
	type result struct {
		jobs []*Job
		err  error
	}
	type chunk struct {
		n    int // its place among the chunks
		raws []json.RawMessage
		out  chan result
	}
	procs := runtime.GOMAXPROCS(0)
	var (
		work   = make(chan chunk, procs)
		order  = make(chan chan result, 4*procs) // the chunks' results, in order
		wg     sync.WaitGroup
		failed atomic.Bool
		jobs   []*Job
		first  error // the first chunk's error, or sink's (the collector's)
		done   = make(chan struct{})
	)
	for range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				out := make([]*Job, len(c.raws))
				var err error
				for i, raw := range c.raws {
					j := new(Job)
					if err = j.UnmarshalJSON(raw); err != nil {
						err = fmt.Errorf("reading a dump's job %d: %w", c.n*dumpChunk+i, err)
						break
					}
					share(j) // here, on every core, rather than in Restore
					out[i] = j
				}
				c.out <- result{out, err}
			}
		}()
	}
	go func() {
		defer close(done)
		for out := range order {
			r := <-out
			switch {
			case first != nil:
			case r.err != nil:
				first = r.err
			case sink != nil:
				first = sink(r.jobs)
			}
			if first != nil {
				failed.Store(true)
				continue
			}
			jobs = append(jobs, r.jobs...)
		}
	}()
	n := 0
	cur := make([]json.RawMessage, 0, dumpChunk)
	send := func() {
		out := make(chan result, 1)
		order <- out
		work <- chunk{n: n, raws: cur, out: out}
		n++
		cur = make([]json.RawMessage, 0, dumpChunk)
	}
	var readErr error
	for i := 0; !failed.Load(); i++ {
		c, err := nextByte(br)
		if err != nil {
			readErr = err
			break
		}
		if c == ']' && i == 0 {
			break
		}
		if i > 0 {
			if c == ']' {
				break
			}
			if c != ',' {
				readErr = fmt.Errorf("reading a dump: %q between jobs %d and %d", c, i-1, i)
				break
			}
			if c, err = nextByte(br); err != nil {
				readErr = err
				break
			}
		}
		if c != '{' {
			readErr = fmt.Errorf("reading a dump: job %d begins with %q, not an object", i, c)
			break
		}
		raw, err := readObject(br, nil)
		if err != nil {
			readErr = fmt.Errorf("reading a dump's job %d: %w", i, err)
			break
		}
		if cur = append(cur, raw); len(cur) == dumpChunk {
			send()
		}
	}
	if len(cur) > 0 && readErr == nil {
		send()
	}
	close(work)
	close(order)
	wg.Wait()
	<-done
	if readErr != nil {
		return nil, readErr
	}
	if first != nil {
		return nil, first
	}
	return jobs, nil
}

// RestoreFrom replaces the whole state with the dump r holds, as Restore
// does, inserting its jobs as they are decoded (ReadDump): reading and
// decoding the text go on while the rows already decoded are stored.
// Nothing changes unless the whole dump reads.
func (s *Store) RestoreFrom(r io.Reader) error {
	txn := s.db.Txn(true)
	defer txn.Abort()
	if err := clearTables(txn); err != nil {
		return err
	}
	d, err := readDump(r, func(js []*Job) error {
		for _, j := range js {
			if err := txn.Insert(tableJobs, j); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := CheckSchema(d.Version); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return s.finishRestore(txn, d)
}
