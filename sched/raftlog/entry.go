package raftlog

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/troupe-hpc/troupe/sched/state"
)

// ErrBadEntry marks a raft log entry schedd cannot decode: its checksum
// does not match or its contents do not parse. The FSM never skips one.
var ErrBadEntry = errors.New("undecodable raft log entry")

// A command entry is entryV1, the CRC-32C of the JSON command (4 bytes,
// big-endian), then the JSON. Entries written before the checksum are
// the bare JSON (they start with '{') and are still read.
const (
	entryV1     = 0x01
	entryHeader = 5
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeCommand is the bytes of c as a log entry of schema version
// schema.
func encodeCommand(c state.Command, schema int) ([]byte, error) {
	c.Version = schema
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	out := make([]byte, entryHeader, entryHeader+len(b))
	out[0] = entryV1
	binary.BigEndian.PutUint32(out[1:], crc32.Checksum(b, castagnoli))
	return append(out, b...), nil
}

// decodeCommand reads a log entry's command back, checking its checksum.
func decodeCommand(data []byte) (state.Command, error) {
	var c state.Command
	body := data
	switch {
	case len(data) == 0:
		return c, fmt.Errorf("%w: empty", ErrBadEntry)
	case data[0] == '{':
	case data[0] == entryV1:
		if len(data) < entryHeader {
			return c, fmt.Errorf("%w: %d bytes, shorter than its header", ErrBadEntry, len(data))
		}
		body = data[entryHeader:]
		want, got := binary.BigEndian.Uint32(data[1:]), crc32.Checksum(body, castagnoli)
		if want != got {
			return c, fmt.Errorf("%w: checksum mismatch (stored %08x, computed %08x over %d bytes)", ErrBadEntry, want, got, len(body))
		}
	default:
		return c, fmt.Errorf("%w: unknown format byte 0x%02x", ErrBadEntry, data[0])
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return c, fmt.Errorf("%w: %v", ErrBadEntry, err)
	}
	return c, state.CheckSchema(c.Version)
}
