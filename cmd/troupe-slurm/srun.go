package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/troupe-hpc/troupe/internal/hostlist"
)

var srunOpts = []option{
	{'n', "ntasks", true}, {'N', "nodes", true}, {'c', "cpus-per-task", true}, {0, "ntasks-per-node", true},
	{'l', "label", false}, {0, "cpu-bind", true}, {0, "cpu_bind", true}, {0, "mpi", true}, {'J', "job-name", true},
	{0, "jobid", true}, {0, "mem-per-cpu", true}, {0, "mem", true}, {0, "exclusive", false}, {0, "export", true},
	{'D', "chdir", true}, {'Q', "quiet", false}, {'v', "verbose", false}, {'K', "kill-on-bad-exit", false},
	{0, "overlap", false}, {'u', "unbuffered", false}, {0, "distribution", true}, {'m', "", true},
	{0, "gres", true}, {0, "gpus-per-task", true}, {'t', "time", true}, {'h', "help", false}, {0, "usage", false},
}

// srun runs a command's tasks in the job's containers, as Slurm's srun
// inside an allocation: task i on the container its block holds (the
// tasks are spread over -N containers, SLURM_TASKS_PER_NODE's way), the
// container srun runs in directly, the others through troupe's ssh
// (the session's, as mpirun's). Each task gets SLURM_PROCID,
// SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_ID and srun exits with the
// highest exit status of its tasks.
func srun(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const prog = "srun"
	opts, cmd, err := getopt(args, srunOpts, true, nil)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\nTry \"srun --help\" for more information\n", prog, err)
		return 1
	}
	ntasks, nnodes, perNode := 0, 0, 0
	label := false
	dir := ""
	for _, o := range opts {
		n := 0
		switch o.name {
		case "ntasks", "nodes", "ntasks-per-node":
			lo, _, _ := strings.Cut(o.value, "-") // -N min-max: min
			if n, err = strconv.Atoi(lo); err != nil || n < 1 {
				return fail(stderr, prog, "--%s %s: want a whole number of at least 1", o.name, o.value)
			}
		}
		switch o.name {
		case "ntasks":
			ntasks = n
		case "nodes":
			nnodes = n
		case "ntasks-per-node":
			perNode = n
		case "label":
			label = true
		case "chdir":
			dir = o.value
		case "help", "usage":
			return usage(stdout, prog, "[OPTIONS...] COMMAND [ARG...]", []string{
				"-n, --ntasks=N          tasks (default: SLURM_NTASKS, or one per node with -N)",
				"-N, --nodes=N           spread them over the job's first N containers",
				"    --ntasks-per-node=N tasks per container",
				"-l, --label             prefix each output line with its task number",
				"-D, --chdir=DIR         run the tasks in DIR (default: this directory)",
				"    --cpu-bind, --mpi, --exclusive, --mem, -c, ...  accepted (the job's limits hold)",
			})
		}
	}
	if len(cmd) == 0 {
		return fail(stderr, prog, "No command given to execute.")
	}
	if os.Getenv("SLURM_JOB_ID") == "" {
		return fail(stderr, prog, "not inside a job: SLURM_JOB_ID is not set (troupe's srun runs the tasks of an sbatch job's\n"+
			"srun: error: session; submit the command with sbatch --wrap, or bsub -I for an interactive one)")
	}
	hosts, err := hostlist.Expand(os.Getenv("SLURM_JOB_NODELIST"))
	if err != nil || len(hosts) == 0 {
		return fail(stderr, prog, "SLURM_JOB_NODELIST %q: %v", os.Getenv("SLURM_JOB_NODELIST"), err)
	}
	if nnodes > len(hosts) {
		return fail(stderr, prog, "Requested node configuration is not available: -N %d, the job has %d", nnodes, len(hosts))
	}
	plan, err := layout(hosts, ntasks, nnodes, perNode, os.Getenv("SLURM_TASKS_PER_NODE"), os.Getenv("SLURM_NTASKS"))
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return fail(stderr, prog, "%v", err)
		}
	}
	self := os.Getenv("SLURMD_NODENAME")
	if self == "" {
		self, _ = os.Hostname()
	}
	step := strconv.Itoa(os.Getpid()) // a step id unique in the job while it runs

	var (
		mu    sync.Mutex
		worst int
		wg    sync.WaitGroup
		procs []*exec.Cmd
	)
	out := &lockedWriter{w: stdout}
	errw := &lockedWriter{w: stderr}
	for i, t := range plan {
		env := []string{
			"SLURM_PROCID=" + strconv.Itoa(i),
			"SLURM_LOCALID=" + strconv.Itoa(t.local),
			"SLURM_NODEID=" + strconv.Itoa(t.node),
			"SLURMD_NODENAME=" + hosts[t.node],
			"SLURM_STEP_ID=" + step,
			"SLURM_STEPID=" + step,
			"SLURM_STEP_NUM_TASKS=" + strconv.Itoa(len(plan)),
			"SLURM_STEP_NUM_NODES=" + strconv.Itoa(t.nodes),
			"SLURM_STEP_NODELIST=" + hostlist.Compress(hosts[:t.nodes]),
			"SLURM_NTASKS=" + strconv.Itoa(len(plan)),
			"SLURM_NPROCS=" + strconv.Itoa(len(plan)),
		}
		var c *exec.Cmd
		if hosts[t.node] == self {
			c = exec.Command(cmd[0], cmd[1:]...)
			c.Env = append(os.Environ(), env...)
			c.Dir = dir
		} else {
			// ssh HOST env VAR=... sh -c 'cd DIR && exec "$@"' srun CMD...
			remote := []string{"env"}
			remote = append(remote, env...)
			remote = append(remote, "/bin/sh", "-c", `cd "$0" && exec "$@"`, dir)
			remote = append(remote, cmd...)
			quoted := make([]string, len(remote))
			for k, w := range remote {
				quoted[k] = shellQuote(w)
			}
			c = exec.Command("ssh", "-o", "BatchMode=yes", hosts[t.node], strings.Join(quoted, " "))
		}
		if i == 0 {
			c.Stdin = stdin
		}
		prefix := ""
		if label {
			prefix = strconv.Itoa(i) + ": "
		}
		c.Stdout = &lineWriter{w: out, prefix: prefix}
		c.Stderr = &lineWriter{w: errw, prefix: prefix}
		if err := c.Start(); err != nil {
			fmt.Fprintf(stderr, "%s: error: task %d: %v\n", prog, i, err)
			mu.Lock()
			worst = max(worst, 127)
			mu.Unlock()
			continue
		}
		procs = append(procs, c)
		wg.Add(1)
		go func(i int, c *exec.Cmd) {
			defer wg.Done()
			err := c.Wait()
			code := 0
			var ee *exec.ExitError
			switch {
			case errors.As(err, &ee):
				code = ee.ExitCode()
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					code = 128 + int(ws.Signal())
				}
				fmt.Fprintf(errw, "%s: error: %s: task %d: Exited with exit code %d\n", prog, hosts[plan[i].node], i, code)
			case err != nil:
				code = 1
			}
			c.Stdout.(*lineWriter).flush()
			c.Stderr.(*lineWriter).flush()
			mu.Lock()
			worst = max(worst, code)
			mu.Unlock()
		}(i, c)
	}
	// Pass Ctrl-C and scancel's SIGTERM on to the tasks.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				for _, p := range procs {
					_ = p.Process.Signal(s)
				}
			case <-done:
				return
			}
		}
	}()
	wg.Wait()
	close(done)
	signal.Stop(sigs)
	return worst
}

// task is where one task runs: its container (index in the node list),
// its rank there, and how many containers the step spans.
type task struct{ node, local, nodes int }

// layout places ntasks over the job's hosts as srun's block
// distribution does: the first nnodes containers, each taking its share
// in turn. Without -n: SLURM_NTASKS when no -N is given, else one per
// node (or --ntasks-per-node per node).
func layout(hosts []string, ntasks, nnodes, perNode int, tasksPerNode, jobTasks string) ([]task, error) {
	if nnodes == 0 {
		switch {
		case ntasks > 0 && perNode > 0:
			nnodes = min(len(hosts), (ntasks+perNode-1)/perNode)
		case ntasks > 0:
			nnodes = min(len(hosts), ntasks)
		default:
			nnodes = len(hosts)
		}
	}
	// Each container's share: --ntasks-per-node, else the job's
	// SLURM_TASKS_PER_NODE.
	share := make([]int, nnodes)
	counts := expandPerNode(tasksPerNode)
	for i := range share {
		switch {
		case perNode > 0:
			share[i] = perNode
		case i < len(counts):
			share[i] = counts[i]
		default:
			share[i] = 1
		}
	}
	if ntasks == 0 {
		switch {
		case perNode > 0:
			ntasks = perNode * nnodes
		case nnodes < len(hosts) || jobTasks == "":
			ntasks = nnodes
		default:
			n, err := strconv.Atoi(jobTasks)
			if err != nil || n < 1 {
				n = nnodes
			}
			ntasks = n
		}
	}
	if ntasks < nnodes {
		nnodes = ntasks
	}
	// Block: fill each container up to its share, then the rest round
	// robin (more tasks than the job's slots overcommit, as srun
	// --overcommit).
	var plan []task
	used := make([]int, nnodes)
	for n := 0; n < nnodes && len(plan) < ntasks; n++ {
		for used[n] < max(share[n], 1) && len(plan) < ntasks {
			plan = append(plan, task{node: n, local: used[n], nodes: nnodes})
			used[n]++
		}
	}
	for n := 0; len(plan) < ntasks; n = (n + 1) % nnodes {
		plan = append(plan, task{node: n, local: used[n], nodes: nnodes})
		used[n]++
	}
	// Block order: the tasks of container 0 first (already so).
	return plan, nil
}

// expandPerNode reads SLURM_TASKS_PER_NODE: "2(x3),1" is 2, 2, 2, 1.
func expandPerNode(s string) []int {
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		n, rep := part, 1
		if i := strings.Index(part, "(x"); i > 0 && strings.HasSuffix(part, ")") {
			n = part[:i]
			r, err := strconv.Atoi(part[i+2 : len(part)-1])
			if err != nil {
				continue
			}
			rep = r
		}
		k, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		for range rep {
			out = append(out, k)
		}
	}
	return out
}

// shellQuote quotes w for a POSIX shell.
func shellQuote(w string) string {
	if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") == "" {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// lockedWriter serialises whole lines of the tasks onto one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// lineWriter passes a task's output on line by line (with -l, each
// prefixed with the task's number), so tasks' lines do not interleave.
type lineWriter struct {
	w      io.Writer
	prefix string
	buf    []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			break
		}
		if _, err := io.WriteString(l.w, l.prefix+string(l.buf[:i+1])); err != nil {
			return 0, err
		}
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

func (l *lineWriter) flush() {
	if len(l.buf) > 0 {
		_, _ = io.WriteString(l.w, l.prefix+string(l.buf))
		l.buf = nil
	}
}
