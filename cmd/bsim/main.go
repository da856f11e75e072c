// Command bsim replays an SWF workload trace through troupe's scheduler
// core in virtual time and prints JSON: jobs, mean wait, mean bounded
// slowdown (τ = 10 s), utilization, makespan, placements per second, the
// distributions of wait and bounded slowdown (p50/p90/p99/max) per width
// class, and per user the share received against the share configured.
// With --compare POLICY it prints instead a table of --policy against
// POLICY (the ratios of issue 18).
//
//	bsim [--policy fcfs|easy|default] [--procs N] [--nodes N] [--depth N]
//	     [--user-max-jobs N] [--user-max-cpu N] [--preceding] trace.swf[.gz]
//	bsim --compare easy trace.swf[.gz]   (the ratio table, default ÷ easy)
//	bsim --qos-map 1=high,*=low [--preempt-mode requeue|cancel]
//	     [--preempt-window 10m] [--span 24h] [--compare no-preempt] trace.swf[.gz]
//	bsim --synthetic place|gang|pass [--nodes 10000] [--jobs 100000]
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/troupe-hpc/troupe/internal/units"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sim"
	"github.com/troupe-hpc/troupe/sim/swf"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "bsim:", err)
		os.Exit(2)
	}
}

// Output is the JSON bsim prints for a trace.
type Output struct {
	Trace   string `json:"trace"`
	Policy  string `json:"policy"`
	Dropped int    `json:"dropped"`
	// Dependencies is how many jobs --preceding gave a dependency.
	Dependencies int `json:"dependencies,omitempty"`
	sim.Result
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: bsim [flags] trace.swf[.gz]
       bsim --synthetic place|gang|pass [--nodes N] [--jobs N]

Replays an SWF workload trace through troupe's scheduler core in virtual
time and prints JSON (mean wait, bounded slowdown, utilization, makespan).

  bsim --policy easy KTH-SP2-1996-2.1-cln.swf.gz
  bsim --compare easy KTH-SP2-1996-2.1-cln.swf.gz

flags:
`)
		fs.PrintDefaults()
	}
	policy := fs.String("policy", "default", "scheduling policy: fcfs, easy or default (fair share + backfill)")
	procs := fs.Int("procs", 0, "machine processors (default: the trace's MaxProcs)")
	nodes := fs.Int("nodes", 0, "split the machine into this many nodes (jobs become multi-node gangs of 1-cpu containers)")
	depth := fs.Int("depth", -1, "backfill reservation depth (default: the policy's)")
	synthetic := fs.String("synthetic", "", "run a synthetic speed benchmark instead: place, gang or pass")
	jobs := fs.Int("jobs", 100000, "synthetic: queued jobs")
	quiet := fs.Bool("q", false, "no progress bar")
	weights := fs.String("weights", "", "priority weights age,fairshare,jobsize (default: the policy's)")
	maxAge := fs.Duration("max-age", 0, "age where the age factor saturates (default: the policy's)")
	var keep, sjf, small *bool
	fs.BoolFunc("favor-small", "the job-size factor favours small jobs (default: the policy's)", func(v string) error {
		b, err := strconv.ParseBool(v)
		small = &b
		return err
	})
	fs.BoolFunc("keep-reservations", "a reservation lasts until its job starts (default: the policy's)", func(v string) error {
		b, err := strconv.ParseBool(v)
		keep = &b
		return err
	})
	fs.BoolFunc("shortest-first", "backfill candidates shortest walltime first (default: the policy's)", func(v string) error {
		b, err := strconv.ParseBool(v)
		sjf = &b
		return err
	})
	compare := fs.String("compare", "", "also replay the trace under this policy (fcfs, easy or default) and print the ratio table of --policy to it")
	starve := fs.Duration("starvation", -1, "starvation threshold: jobs pending this long hold a reservation; 0: none (default: the policy's)")
	userJobs := fs.Int("user-max-jobs", 0, "at most this many running jobs per user, as a partition's user_limits.max_jobs; 0: no limit")
	userCPU := fs.Float64("user-max-cpu", 0, "at most this many processors held by one user's running jobs, as user_limits.max_cpu; 0: no limit")
	qosMap := fs.String("qos-map", "", "give jobs a QOS by their SWF queue number, e.g. 1=high,*=low: QOSes rank in the order first named, each preempting every later one")
	preemptMode := fs.String("preempt-mode", core.PreemptRequeue, "with --qos-map: what becomes of a preempted job, requeue or cancel")
	preemptWindow := fs.Duration("preempt-window", -1, "with --qos-map: a job preempted is not preempted again this long (default: the policy's)")
	span := fs.Duration("span", 0, "replay only the jobs submitted in this first stretch of the trace (e.g. 24h); 0: all")
	resvFile := fs.String("reservations", "", "replay the reservations of this `file` (lines NAME START DURATION NODES [FLAGS]; see bsim(1)) and print the\nmeasures with them against without them")
	preceding := fs.Bool("preceding", false, "a record's preceding job (SWF field 17) is a dependency on its end (bsub -w ended(N)): the job waits for it, as schedd would")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *synthetic != "" {
		n := *nodes
		if n == 0 {
			n = 10000
		}
		r, err := sim.RunSynthetic(*synthetic, n, *jobs, time.Now)
		if err != nil {
			return err
		}
		return printJSON(stdout, r)
	}
	if fs.NArg() != 1 {
		return errors.New("want one trace file (SWF, plain or .gz); see -h")
	}
	pol, fair, err := sim.Policy(*policy)
	if err != nil {
		return err
	}
	if *depth >= 0 {
		pol.ReservationDepth = *depth
	}
	if *weights != "" {
		if _, err := fmt.Sscanf(*weights, "%g,%g,%g", &pol.Weights.Age, &pol.Weights.FairShare, &pol.Weights.JobSize); err != nil {
			return fmt.Errorf("--weights %q: want age,fairshare,jobsize: %w", *weights, err)
		}
	}
	if *maxAge > 0 {
		pol.MaxAge = *maxAge
	}
	if keep != nil {
		pol.KeepReservations = *keep
	}
	if small != nil {
		pol.FavorSmall = *small
	}
	if sjf != nil {
		pol.ShortestFirst = *sjf
	}
	if *starve >= 0 {
		pol.StarvationAge = *starve
	}
	if *userJobs < 0 {
		return fmt.Errorf("--user-max-jobs %d: want 0 (no limit) or more", *userJobs)
	}
	if *userCPU < 0 || *userCPU > 0 && units.MilliCPU(*userCPU) < units.MinCPUMilli {
		return fmt.Errorf("--user-max-cpu %g: want 0 (no limit) or at least %g, as partitions.hcl's max_cpu", *userCPU, float64(units.MinCPUMilli)/1000)
	}
	limits := core.Limits{Jobs: *userJobs, Res: core.Res{CPUMilli: units.MilliCPU(*userCPU)}}
	l, err := swf.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	p := *procs
	if p == 0 {
		p = int(l.Header.MaxProcs)
	}
	if p == 0 {
		p = int(l.Header.MaxNodes)
	}
	if p <= 0 {
		return errors.New("the trace names no MaxProcs or MaxNodes; give --procs")
	}
	js, dropped := sim.FromSWF(l.Jobs, p)
	if *span > 0 && len(js) > 0 {
		first := js[0].Submit
		for _, j := range js {
			first = min(first, j.Submit)
		}
		js = slices.DeleteFunc(js, func(j sim.Job) bool { return j.Submit-first >= int64(span.Seconds()) })
	}
	if c := limits.Res.CPUMilli; c > 0 {
		// schedd refuses a job that alone is past a user's cpu limit
		// (user_limits.max_cpu); so does the replay.
		n := len(js)
		js = slices.DeleteFunc(js, func(j sim.Job) bool { return int64(j.Procs)*1000 > c })
		dropped += n - len(js)
	}
	deps := 0
	if *preceding {
		deps = sim.Preceding(l.Jobs, js)
	}
	o := sim.Options{Procs: p, Nodes: *nodes, Policy: pol, FairShare: fair, UserLimits: limits}
	if *qosMap != "" {
		if *preemptMode != core.PreemptRequeue && *preemptMode != core.PreemptCancel {
			return fmt.Errorf("--preempt-mode %q: want %s or %s", *preemptMode, core.PreemptRequeue, core.PreemptCancel)
		}
		qs, urgent, err := sim.MapQOS(*qosMap, js)
		if err != nil {
			return fmt.Errorf("--qos-map: %w", err)
		}
		o.QOS, o.Urgent, o.PreemptMode = qs, urgent, *preemptMode
		if *preemptWindow >= 0 {
			o.Policy.PreemptWindow = *preemptWindow
		}
	}
	if !*quiet {
		o.Progress = progress(stderr, time.Now())
	}
	if *resvFile != "" {
		if *compare != "" {
			return errors.New("--reservations compares with and without them; drop --compare")
		}
		f, err := os.Open(*resvFile)
		if err != nil {
			return err
		}
		rs, err := sim.ReadReservations(f, *resvFile, *nodes)
		f.Close()
		if err != nil {
			return err
		}
		without, err := sim.Run(js, o, time.Now)
		if err != nil {
			return err
		}
		o.Reservations = rs
		with, err := sim.Run(js, o, time.Now)
		if err != nil {
			return err
		}
		return printWindows(stdout, Output{Trace: fs.Arg(0), Policy: *policy, Dropped: dropped, Dependencies: deps, Result: with},
			Output{Trace: fs.Arg(0), Policy: *policy, Dropped: dropped, Dependencies: deps, Result: without}, len(rs))
	}
	res, err := sim.Run(js, o, time.Now)
	if err != nil {
		return err
	}
	out := Output{Trace: fs.Arg(0), Policy: *policy, Dropped: dropped, Dependencies: deps, Result: res}
	if *compare == "" {
		return printJSON(stdout, out)
	}
	if *compare == noPreempt {
		if o.QOS == nil {
			return errors.New("--compare no-preempt: give --qos-map too")
		}
		o.PreemptMode = ""
		bres, err := sim.Run(js, o, time.Now)
		if err != nil {
			return err
		}
		return printPreempt(stdout, out, Output{Trace: fs.Arg(0), Policy: *policy, Dropped: dropped, Dependencies: deps, Result: bres})
	}
	bpol, bfair, err := sim.Policy(*compare)
	if err != nil {
		return fmt.Errorf("--compare: %w", err)
	}
	o.Policy, o.FairShare = bpol, bfair
	bres, err := sim.Run(js, o, time.Now)
	if err != nil {
		return err
	}
	return printCompare(stdout, out, Output{Trace: fs.Arg(0), Policy: *compare, Dropped: dropped, Dependencies: deps, Result: bres})
}

// noPreempt is --compare's value that replays the trace with its QOSes
// but without preemption.
const noPreempt = "no-preempt"

// printPreempt writes the table of a replay with preemption (a) against
// the same without (b).
func printPreempt(w io.Writer, a, b Output) error {
	pa, pb := a.Preemption, b.Preemption
	fmt.Fprintf(w, "%s: %d jobs, %s, preemption (%s) ÷ none\n", a.Trace, a.Jobs, a.Policy, "QOS "+pa.Urgent.Class)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\tpreempt\tnone\tratio\t\n")
	row := func(name string, x, y float64) {
		r := "-"
		if y != 0 {
			r = fmt.Sprintf("%.3f", x/y)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%s\t\n", name, x, y, r)
	}
	row("urgent jobs", float64(pa.Urgent.Jobs), float64(pb.Urgent.Jobs))
	row("urgent mean wait (s)", pa.Urgent.Wait.Mean, pb.Urgent.Wait.Mean)
	row("urgent p90 wait (s)", pa.Urgent.Wait.P90, pb.Urgent.Wait.P90)
	row("urgent max wait (s)", pa.Urgent.Wait.Max, pb.Urgent.Wait.Max)
	row("mean wait, all (s)", a.MeanWait, b.MeanWait)
	row("preemptions", float64(pa.Preemptions), float64(pb.Preemptions))
	row("preempted twice in window", float64(pa.Twice), float64(pb.Twice))
	row("lost core-hours (requeue)", pa.LostCoreHours, pb.LostCoreHours)
	row("placements/s", a.PlacementsPerSec, b.PlacementsPerSec)
	fmt.Fprintf(tw, "utilization\t%.4f\t%.4f\t%+.4f\t\n", a.Utilization, b.Utilization, a.Utilization-b.Utilization)
	return tw.Flush()
}

// printCompare writes the table of a against b: each measure under both
// and their ratio (a ÷ b), utilization as a difference.
func printCompare(w io.Writer, a, b Output) error {
	fmt.Fprintf(w, "%s: %d jobs, %s ÷ %s\n", a.Trace, a.Jobs, a.Policy, b.Policy)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\t%s\t%s\tratio\t\n", a.Policy, b.Policy)
	row := func(name string, x, y float64) {
		r := "-"
		if y != 0 {
			r = fmt.Sprintf("%.3f", x/y)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%s\t\n", name, x, y, r)
	}
	row("bounded slowdown", a.MeanBSLD, b.MeanBSLD)
	row("mean wait (s)", a.MeanWait, b.MeanWait)
	row("max wait (s)", a.MaxWait, b.MaxWait)
	row("mean wait >1/4 machine (s)", a.WideMeanWait, b.WideMeanWait)
	for _, c := range []string{sim.ClassOne, sim.ClassQuarter, sim.ClassWide} {
		x, y := classOf(a.Classes, c), classOf(b.Classes, c)
		row("p99 wait "+c+" (s)", x.Wait.P99, y.Wait.P99)
	}
	fmt.Fprintf(tw, "utilization\t%.4f\t%.4f\t%+.4f\t\n", a.Utilization, b.Utilization, a.Utilization-b.Utilization)
	return tw.Flush()
}

// printWindows writes the measures with the reservations against
// without them: what the windows cost.
func printWindows(w io.Writer, with, without Output, n int) error {
	fmt.Fprintf(w, "%s: %d jobs, %s policy, with %d reservation(s) against without\n", with.Trace, with.Jobs, with.Policy, n)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\twith\twithout\tdifference\t\n")
	fmt.Fprintf(tw, "utilization\t%.4f\t%.4f\t%+.4f\t\n", with.Utilization, without.Utilization, with.Utilization-without.Utilization)
	fmt.Fprintf(tw, "machine time in windows\t%.4f\t%.4f\t%+.4f\t\n", with.Reserved, without.Reserved, with.Reserved-without.Reserved)
	fmt.Fprintf(tw, "idle while jobs waited\t%.4f\t%.4f\t%+.4f\t\n", with.IdleWaiting, without.IdleWaiting, with.IdleWaiting-without.IdleWaiting)
	fmt.Fprintf(tw, "utilization outside windows\t%.4f\t%.4f\t%+.4f\t\n", with.Utilization/(1-with.Reserved), without.Utilization, with.Utilization/(1-with.Reserved)-without.Utilization)
	fmt.Fprintf(tw, "makespan (s)\t%.0f\t%.0f\t%+.0f\t\n", with.Makespan, without.Makespan, with.Makespan-without.Makespan)
	fmt.Fprintf(tw, "mean wait (s)\t%.1f\t%.1f\t%+.1f\t\n", with.MeanWait, without.MeanWait, with.MeanWait-without.MeanWait)
	fmt.Fprintf(tw, "max wait (s)\t%.1f\t%.1f\t%+.1f\t\n", with.MaxWait, without.MaxWait, with.MaxWait-without.MaxWait)
	fmt.Fprintf(tw, "bounded slowdown\t%.1f\t%.1f\t%+.1f\t\n", with.MeanBSLD, without.MeanBSLD, with.MeanBSLD-without.MeanBSLD)
	return tw.Flush()
}

func classOf(ds []sim.Dist, c string) sim.Dist {
	for _, d := range ds {
		if d.Class == c {
			return d
		}
	}
	return sim.Dist{}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// progress draws a bar on w once the run has taken more than a second.
func progress(w io.Writer, start time.Time) func(done, total int) {
	shown := false
	return func(done, total int) {
		if time.Since(start) < time.Second || total == 0 {
			return
		}
		const width = 40
		k := done * width / total
		bar := make([]byte, width)
		for i := range bar {
			bar[i] = ' '
			if i < k {
				bar[i] = '#'
			}
		}
		fmt.Fprintf(w, "\r[%s] %d/%d jobs", bar, done, total)
		shown = true
		if done == total && shown {
			fmt.Fprintln(w)
		}
	}
}
