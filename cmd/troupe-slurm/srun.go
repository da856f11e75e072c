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
	"github.com/troupe-hpc/troupe/nodelet/session"
)

var srunOpts = []option{
	{'n', "ntasks", true}, {'N', "nodes", true}, {'c', "cpus-per-task", true}, {0, "ntasks-per-node", true},
	{'l', "label", false}, {0, "cpu-bind", true}, {0, "mpi", true}, {'J', "job-name", true},
	{0, "jobid", true}, {0, "mem-per-cpu", true}, {0, "mem", true}, {0, "exclusive", false}, {0, "export", true},
	{'D', "chdir", true}, {'Q', "quiet", false}, {'v', "verbose", false}, {'K', "kill-on-bad-exit", false},
	{0, "overlap", false}, {'u', "unbuffered", false}, {0, "distribution", true}, {'m', "", true},
	{0, "gres", true}, {0, "gpus-per-task", true}, {'t', "time", true}, {'h', "help", false}, {0, "usage", false},
}

// srun runs a command's tasks in the job's containers, as Slurm's srun
// inside an allocation: the tasks are spread in blocks over the
// containers (see layout); those of the container srun runs in start
// here, the others through ssh, troupe's session ssh (as mpirun's). Each task gets SLURM_PROCID,
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
	plan := layout(hosts, ntasks, nnodes, perNode, os.Getenv("SLURM_NTASKS"))
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
			c = exec.Command(sshClient(), "-o", "BatchMode=yes", hosts[t.node], strings.Join(quoted, " "))
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

// sshClient is the session's ssh (troupe-ssh, which reaches the other
// containers' sshd with the session's key) where the container has it,
// whatever the job's PATH says; else the ssh on PATH.
func sshClient() string {
	if st, err := os.Stat(session.SSHPath); err == nil && st.Mode()&0o111 != 0 {
		return session.SSHPath
	}
	return "ssh"
}

// task is where one task runs: its container (index in the node list),
// its rank there, and how many containers the step spans.
type task struct{ node, local, nodes int }

// layout places ntasks over the job's hosts as srun's block
// distribution does: over the first nnodes containers (default: all,
// but no more than there are tasks), each taking an even share in
// order, the first ones one more. Without -n: --ntasks-per-node per
// node, one per node with -N, else the job's SLURM_NTASKS.
func layout(hosts []string, ntasks, nnodes, perNode int, jobTasks string) []task {
	explicitN := nnodes > 0
	if nnodes == 0 {
		nnodes = len(hosts)
	}
	if ntasks == 0 {
		switch {
		case perNode > 0:
			ntasks = perNode * nnodes
		case explicitN:
			ntasks = nnodes
		default:
			ntasks = nnodes
			if n, err := strconv.Atoi(jobTasks); err == nil && n > 0 {
				ntasks = n
			}
		}
	}
	if perNode > 0 {
		nnodes = min(nnodes, (ntasks+perNode-1)/perNode)
	}
	nnodes = min(nnodes, ntasks)
	var plan []task
	for n := range nnodes {
		share := ntasks / nnodes
		if n < ntasks%nnodes {
			share++
		}
		if perNode > 0 {
			share = min(perNode, ntasks-len(plan))
		}
		for k := range share {
			plan = append(plan, task{node: n, local: k, nodes: nnodes})
		}
	}
	return plan
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
