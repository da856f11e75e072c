package core

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/reason"
)

// Transcript tests in the manner of etcd raft's datadriven interaction
// tests: testdata/sched/*.txt hold commands, each followed by "----" and
// the output it must give, blocks separated by a blank line. Run with
// -rewrite to regenerate the outputs (then read the diff).
//
// Commands:
//
//	node NAME cpu=N mem=GiB [gpus=f,f,…] [parts=a,b]
//	partition NAME [tier=N] [default-walltime=D] [quantum=F]
//	policy [depth=N] [age=W] [fairshare=W] [size=W] [partition=W] [favor-small] [max-age=D] [default-walltime=D] [max-backfill=N]
//	submit id=N [n=N] [cpu=N] [mem=GiB] [gpu=F] [mode=single|multi] [walltime=D] [user=U] [fs=F] [nice=N] [part=P] [held=1]
//	tick D            advance now
//	schedule          run one pass at now and apply its plan
//	finish id=N       a running job ends; its resources come back
//	set id=N [fs=F] [held=0|1]
//	dump-queue        pending jobs in priority order with reason and priority
//	dump-nodes        free resources per node
var rewrite = flag.Bool("rewrite", false, "rewrite transcript outputs in testdata/sched")

func TestTranscripts(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "sched", "*.txt"))
	if len(files) == 0 {
		t.Fatal("no transcripts in testdata/sched")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runTranscript(t, f) })
	}
}

type block struct{ cmd, want string }

func parseTranscript(t *testing.T, path string) []block {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []block
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			if strings.HasPrefix(l, "#") {
				out = append(out, block{cmd: l})
			}
			continue
		}
		b := block{cmd: l}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command without ----", path, i+1)
		}
		i += 2
		var want []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		b.want = strings.Join(want, "\n")
		out = append(out, b)
	}
	return out
}

func runTranscript(t *testing.T, path string) {
	blocks := parseTranscript(t, path)
	h := &harness{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), parts: map[string]Partition{}, running: map[uint64]Running{}}
	h.start = h.now
	var sb strings.Builder
	for _, b := range blocks {
		if strings.HasPrefix(b.cmd, "#") {
			sb.WriteString(b.cmd + "\n")
			continue
		}
		got := strings.TrimRight(h.run(t, b.cmd), "\n")
		if !*rewrite && got != b.want {
			t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", path, b.cmd, got, b.want)
		}
		sb.WriteString(b.cmd + "\n----\n")
		if got != "" {
			sb.WriteString(got + "\n")
		}
		sb.WriteString("\n")
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(sb.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// harness is the little world a transcript drives: nodes, a queue and
// running jobs, updated from each plan as schedd would.
type harness struct {
	start, now time.Time
	nodes      []Node
	queue      []Job
	running    map[uint64]Running
	parts      map[string]Partition
	policy     Policy
	starts     map[uint64]StartEstimate
}

func kv(t *testing.T, fields []string) map[string]string {
	m := map[string]string{}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}

func num(t *testing.T, s string, def float64) float64 {
	if s == "" {
		return def
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("number %q: %v", s, err)
	}
	return f
}

func dur(t *testing.T, s string) time.Duration {
	if s == "" {
		return 0
	}
	if strings.HasSuffix(s, "d") {
		return time.Duration(num(t, strings.TrimSuffix(s, "d"), 0) * float64(24*time.Hour))
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return d
}

func (h *harness) rel(at time.Time) string { return "+" + at.Sub(h.start).String() }

func (h *harness) run(t *testing.T, line string) string {
	f := strings.Fields(line)
	a := kv(t, f[1:])
	switch f[0] {
	case "node":
		n := Node{Name: f[1], Capacity: Res{CPUMilli: int64(num(t, a["cpu"], 0) * 1000), Memory: int64(num(t, a["mem"], 0) * gib)}}
		n.Free = n.Capacity
		if g := a["gpus"]; g != "" {
			for i, s := range strings.Split(g, ",") {
				n.Devices = append(n.Devices, Device{ID: i, Free: num(t, s, 1)})
				n.Capacity.GPU++
				n.Free.GPU += num(t, s, 1)
			}
		}
		if p := a["parts"]; p != "" {
			n.Partitions = strings.Split(p, ",")
		}
		h.nodes = append(h.nodes, n)
	case "partition":
		h.parts[f[1]] = Partition{Tier: num(t, a["tier"], 0), GPUQuantum: num(t, a["quantum"], 0)}
	case "policy":
		_, small := a["favor-small"]
		h.policy = Policy{ReservationDepth: int(num(t, a["depth"], 0)), MaxAge: dur(t, a["max-age"]), FavorSmall: small,
			MaxBackfillJobs: int(num(t, a["max-backfill"], 0)),
			Weights:         Weights{Age: num(t, a["age"], 0), FairShare: num(t, a["fairshare"], 0), JobSize: num(t, a["size"], 0), Partition: num(t, a["partition"], 0)}}
	case "submit":
		j := Job{ID: uint64(num(t, a["id"], 0)), Mode: ModeSingleNode, Submit: h.now, Walltime: dur(t, a["walltime"]),
			User: a["user"], Account: a["user"], FairShare: num(t, a["fs"], 0), Nice: num(t, a["nice"], 0),
			Partition: a["part"], Held: a["held"] == "1", Reason: reason.Priority}
		if a["mode"] == "multi" {
			j.Mode = ModeMultiNode
		}
		r := Res{CPUMilli: int64(num(t, a["cpu"], 1) * 1000), Memory: int64(num(t, a["mem"], 1) * gib), GPU: num(t, a["gpu"], 0)}
		for i := 0; i < int(num(t, a["n"], 1)); i++ {
			j.Containers = append(j.Containers, r)
		}
		h.queue = append(h.queue, j)
	case "set":
		for i := range h.queue {
			if h.queue[i].ID == uint64(num(t, a["id"], 0)) {
				if v, ok := a["fs"]; ok {
					h.queue[i].FairShare = num(t, v, 0)
				}
				if v, ok := a["held"]; ok {
					h.queue[i].Held = v == "1"
				}
			}
		}
	case "tick":
		h.now = h.now.Add(dur(t, f[1]))
		return "now " + h.rel(h.now)
	case "schedule":
		return h.schedule()
	case "finish":
		id := uint64(num(t, a["id"], 0))
		r, ok := h.running[id]
		if !ok {
			return fmt.Sprintf("job %d is not running", id)
		}
		for i, n := range r.Nodes {
			for k := range h.nodes {
				if h.nodes[k].Name == n {
					h.nodes[k].Free = h.nodes[k].Free.Add(r.Containers[i])
					if i < len(r.GPUs) {
						for _, g := range r.GPUs[i] {
							h.nodes[k].Devices[g.Device].Free += g.Share
						}
					}
				}
			}
		}
		delete(h.running, id)
	case "dump-queue":
		return h.dumpQueue()
	case "dump-nodes":
		var sb strings.Builder
		for _, n := range h.nodes {
			fmt.Fprintf(&sb, "%s cpu=%g/%g mem=%g/%g", n.Name, float64(n.Free.CPUMilli)/1000, float64(n.Capacity.CPUMilli)/1000,
				float64(n.Free.Memory)/gib, float64(n.Capacity.Memory)/gib)
			for _, d := range n.Devices {
				fmt.Fprintf(&sb, " gpu%d=%.2f", d.ID, d.Free)
			}
			sb.WriteString("\n")
		}
		return sb.String()
	default:
		t.Fatalf("unknown command %q", f[0])
	}
	return ""
}

func (h *harness) snapshot() Snapshot {
	s := Snapshot{Nodes: h.nodes, Queue: h.queue, Partitions: h.parts, Policy: h.policy}
	ids := make([]uint64, 0, len(h.running))
	for id := range h.running {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		s.Running = append(s.Running, h.running[id])
	}
	return s
}

func (h *harness) schedule() string {
	p := Schedule(h.snapshot(), h.now)
	var sb strings.Builder
	byID := map[uint64]int{}
	for i := range h.queue {
		byID[h.queue[i].ID] = i
	}
	for _, pl := range p.Placements {
		j := h.queue[byID[pl.JobID]]
		fmt.Fprintf(&sb, "place %d %s", pl.JobID, strings.Join(pl.Nodes, ","))
		if pl.GPUs != nil {
			var gs []string
			for _, c := range pl.GPUs {
				var ds []string
				for _, g := range c {
					ds = append(ds, fmt.Sprintf("%d:%g", g.Device, g.Share))
				}
				gs = append(gs, "["+strings.Join(ds, " ")+"]")
			}
			fmt.Fprintf(&sb, " gpus=%s", strings.Join(gs, ""))
		}
		if pl.Backfilled {
			sb.WriteString(" backfilled")
		}
		sb.WriteString("\n")
		r := Running{JobID: j.ID, Start: h.now, Walltime: j.Walltime, Partition: j.Partition, Nodes: pl.Nodes, Containers: j.Containers, GPUs: pl.GPUs}
		for i, n := range pl.Nodes {
			for k := range h.nodes {
				if h.nodes[k].Name == n {
					c := j.Containers[i]
					if pl.GPUs != nil && pl.GPUs[i] != nil {
						c.GPU = 0
						for _, g := range pl.GPUs[i] {
							h.nodes[k].Devices[g.Device].Free -= g.Share
							c.GPU += g.Share
						}
						r.Containers = slices.Clone(r.Containers)
						r.Containers[i] = c
					}
					h.nodes[k].Free = h.nodes[k].Free.Sub(c)
				}
			}
		}
		h.running[j.ID] = r
	}
	for _, r := range p.Reasons {
		fmt.Fprintf(&sb, "reason %d %s\n", r.JobID, r.Reason)
		h.queue[byID[r.JobID]].Reason = r.Reason
	}
	h.starts = map[uint64]StartEstimate{}
	for _, st := range p.Starts {
		fmt.Fprintf(&sb, "start %d %s %s\n", st.JobID, h.rel(st.Start), strings.Join(st.Nodes, ","))
		h.starts[st.JobID] = st
	}
	placed := map[uint64]bool{}
	for _, pl := range p.Placements {
		placed[pl.JobID] = true
	}
	h.queue = slices.DeleteFunc(h.queue, func(j Job) bool { return placed[j.ID] })
	return sb.String()
}

func (h *harness) dumpQueue() string {
	s := h.snapshot()
	var total int64
	for _, n := range s.Nodes {
		total += n.Capacity.CPUMilli
	}
	pr := newPrio(&s, total)
	var sb strings.Builder
	elig := eligible(&s, nil)
	for _, qi := range pr.order(s.Queue, elig, h.now) {
		j := &s.Queue[qi]
		f := pr.factors(j, h.now)
		fmt.Fprintf(&sb, "%d %s prio=%.1f age=%.3f fs=%.3f size=%.3f part=%.3f", j.ID, j.Reason, f.Priority, f.Age, f.FairShare, f.JobSize, f.Partition)
		if st, ok := h.starts[j.ID]; ok {
			fmt.Fprintf(&sb, " start=%s", h.rel(st.Start))
		}
		sb.WriteString("\n")
	}
	for i, j := range s.Queue {
		if !elig[i] {
			fmt.Fprintf(&sb, "%d %s (ineligible)\n", j.ID, j.Reason)
		}
	}
	return sb.String()
}
