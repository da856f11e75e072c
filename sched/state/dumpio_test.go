package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
)

// WriteDump writes the text Dump.MarshalJSON does (but for the space
// between jobs), and ReadDump reads it, and Dump.MarshalJSON's, back to
// the same dump: in the current schema and in an older one, with more
// jobs than one worker's chunk.
func TestDumpStreamRoundTrip(t *testing.T) {
	h := newHarness(t)
	for i := range 3*dumpChunk + 7 {
		j := session(1 + i%3)
		j.Name = fmt.Sprintf("j%d", i)
		j.Spec.Env = map[string]string{"I": fmt.Sprint(i % 5)}
		h.apply(Command{Act: Submit{Jobs: []*Job{j}}})
	}
	h.apply(Command{Act: Kill{Job: JobRef{ID: 2}}})
	for _, version := range []int{SchemaVersion, 10} {
		t.Run(fmt.Sprintf("schema %d", version), func(t *testing.T) {
			d := h.st.Snapshot().Dump()
			d.Version = version
			whole, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			var streamed bytes.Buffer
			if err := WriteDump(&streamed, d); err != nil {
				t.Fatal(err)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, streamed.Bytes()); err != nil {
				t.Fatalf("WriteDump's text is no JSON: %v", err)
			}
			if !bytes.Equal(compact.Bytes(), whole) {
				t.Fatalf("WriteDump wrote %d bytes unlike Dump.MarshalJSON's %d", compact.Len(), len(whole))
			}
			for from, text := range map[string][]byte{"WriteDump": streamed.Bytes(), "Dump.MarshalJSON": whole} {
				got, err := ReadDump(bytes.NewReader(text))
				if err != nil {
					t.Fatalf("reading %s's dump: %v", from, err)
				}
				var want Dump
				if err := json.Unmarshal(whole, &want); err != nil {
					t.Fatal(err)
				}
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				if !bytes.Equal(g, w) {
					t.Fatalf("ReadDump of %s's dump differs from json.Unmarshal's", from)
				}
				if len(got.Jobs) != len(d.Jobs) || got.Jobs[1].State != api.JobCancelled {
					t.Fatalf("ReadDump of %s's dump: %d jobs, job 2 %s", from, len(got.Jobs), got.Jobs[1].State)
				}
				st := New()
				if err := st.Restore(got); err != nil {
					t.Fatal(err)
				}
				from := New()
				if err := from.RestoreFrom(bytes.NewReader(text)); err != nil {
					t.Fatal(err)
				}
				a, _ := json.Marshal(st.Snapshot().Dump())
				b, _ := json.Marshal(from.Snapshot().Dump())
				if !bytes.Equal(a, b) {
					t.Fatal("RestoreFrom's state differs from Restore's of the same dump")
				}
				if from.Snapshot().Queued() != st.Snapshot().Queued() || len(from.Snapshot().LiveJobs()) != len(st.Snapshot().LiveJobs()) {
					t.Fatal("RestoreFrom's indexes differ from Restore's")
				}
			}
		})
	}
}

// A dump whose jobs do not decode, or that is cut short, is refused.
func TestReadDumpRefusesDamage(t *testing.T) {
	for _, text := range []string{
		`{"version":11,"jobs":[{"id":1},{"id":"two"}],"nodes":[]}`,
		`{"version":11,"jobs":[{"id":1},`,
		`{"version":11,"jobs":{"id":1}}`,
		`[]`,
	} {
		if _, err := ReadDump(strings.NewReader(text)); err == nil {
			t.Errorf("ReadDump(%s) read it", text)
		}
	}
	for _, tc := range []struct {
		text  string
		jobs  int
		nodes int
	}{
		{`{"nodes":[{"name":"n1"}],"version":11,"jobs":[{"id":1}]}`, 1, 1},
		{` { "jobs" : [ ] , "nodes" : [ ] } `, 0, 0},
		{"{\"jobs\":[\n{\"id\":1,\"name\":\"a}\\\"{[\\\\\"}\n,\t{\"id\":2,\"spec\":{\"env\":{\"X\":\"]\"}}}]}", 2, 0},
	} {
		d, err := ReadDump(strings.NewReader(tc.text))
		if err != nil || len(d.Jobs) != tc.jobs || len(d.Nodes) != tc.nodes {
			t.Errorf("ReadDump(%s): %d jobs, %d nodes, %v; want %d and %d", tc.text, len(d.Jobs), len(d.Nodes), err, tc.jobs, tc.nodes)
		}
		if tc.jobs == 2 && (d.Jobs[0].Name != `a}"{[\` || d.Jobs[1].Spec.Env["X"] != "]") {
			t.Errorf("ReadDump(%s) read the jobs' text wrong: %q, %v", tc.text, d.Jobs[0].Name, d.Jobs[1].Spec.Env)
		}
	}
	for _, text := range []string{
		`{"version":11,"jobs":[{"id":1,"name":"cut`,
		`{"version":11,"jobs":[{"id":1} {"id":2}]}`,
		`{"version":11,"jobs":[1,2]}`,
		`{"version":11,"jobs":nul}`,
		`{"version":11,"jobs":[{"id":1}] "nodes":[]}`,
	} {
		if _, err := ReadDump(strings.NewReader(text)); err == nil {
			t.Errorf("ReadDump(%s) read it", text)
		}
	}
	// RestoreFrom of a damaged dump leaves the state as it was.
	h := newHarness(t)
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	if err := h.st.RestoreFrom(strings.NewReader(`{"version":11,"jobs":[{"id":7},{"id":"two"}]}`)); err == nil {
		t.Error("RestoreFrom read a damaged dump")
	}
	if js := h.st.Snapshot().Jobs(); len(js) != 1 || js[0].ID != 1 {
		t.Errorf("after a refused RestoreFrom the state holds %d jobs, want job 1 alone", len(js))
	}
	d, err := ReadDump(strings.NewReader(`{"version":11,"jobs":null,"future":{"x":1},"nodes":[{"name":"n1"}]}`))
	if err != nil || d.Jobs != nil || len(d.Nodes) != 1 {
		t.Errorf("ReadDump of a dump without jobs and with a field it does not know: %+v, %v", d, err)
	}
}
