package script

import (
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/troupe-hpc/troupe/jobspec"
)

// Submit is where and how a script job is submitted.
type Submit struct {
	Cwd     string   // the submit directory (absolute)
	Environ []string // the submitter's environment, os.Environ's form
	// DefaultImage is the site's image for script jobs; empty: "host".
	DefaultImage string
	// Script is the script (nil for a command line); Name its file name
	// ("" for stdin), Args its arguments.
	Script *Script
	Name   string
	Args   []string
	// Command is the command line's words (no script): run as LSF runs
	// it, /bin/sh -c with the words joined by spaces.
	Command []string
}

// notPassed are variables of the submitter's shell that describe it, not
// the job, and those troupe sets in every container (HOME is the
// session's home, where its ssh keys are; USER and LOGNAME the
// submitter's name): never passed.
var notPassed = map[string]bool{
	"HOSTNAME": true, "PWD": true, "OLDPWD": true, "SHLVL": true, "_": true,
	"HOME": true, "USER": true, "LOGNAME": true,
	"TROUPE_JOB_ID": true, "LSB_JOBID": true, "LSB_JOBNAME": true,
	"TROUPE_ARRAY_ID": true, "TROUPE_ARRAY_INDEX": true, "LSB_JOBINDEX": true, "LSB_JOBINDEX_END": true,
	"LSB_JOBINDEX_STEP": true, "SLURM_ARRAY_JOB_ID": true, "SLURM_ARRAY_TASK_ID": true, "SLURM_ARRAY_TASK_MIN": true,
	"SLURM_ARRAY_TASK_MAX": true, "SLURM_ARRAY_TASK_COUNT": true, "SLURM_ARRAY_TASK_STEP": true,
}

// Job builds the job o asks for; check it with its Validate.
func (o *Options) Job(s Submit) (*jobspec.Job, error) {
	j := &jobspec.Job{
		Partition:   o.Partition,
		Account:     o.Account,
		Reservation: o.Reservation,
		QOS:         o.QOS,
		Walltime:    o.Walltime,
		Output:      o.Output,
		Error:       o.Error,
		Array:       o.Array,
		Licenses:    maps.Clone(o.Licenses),
	}
	if j.Account == "" {
		j.Account = o.Group // LSF -G: the fair-share group
	}
	// The command.
	switch {
	case s.Script != nil:
		cmd, err := s.Script.command(s.Name, s.Args)
		if err != nil {
			return nil, err
		}
		j.Command = cmd
	case len(s.Command) > 0:
		j.Command = []string{"/bin/sh", "-c", strings.Join(s.Command, " ")}
	default:
		return nil, fmt.Errorf("%w: no command", ErrScript)
	}
	j.Name = o.Name
	if j.Name == "" {
		j.Name = defaultName(s)
	} else if n := JobName(j.Name); n != j.Name {
		o.Warnings = append(o.Warnings, Warning{Option: "-J", Msg: fmt.Sprintf(
			"job name %q: troupe's are up to 63 letters, digits, '.', '_' or '-'; submitted as %q", j.Name, n)})
		j.Name = n
	}
	j.Output = ExpandName(j.Output, j.Name)
	j.Error = ExpandName(j.Error, j.Name)

	// The session's shape.
	o.shape(j)

	// Where and as what it runs.
	cwd := o.Cwd
	switch {
	case cwd == "":
		cwd = s.Cwd
	case !filepath.IsAbs(cwd):
		cwd = filepath.Join(s.Cwd, cwd)
	}
	j.Workdir = filepath.Clean(cwd)
	if o.Cwd != "" {
		// Relative output paths are the job's directory's, as LSF's.
		for _, p := range []*string{&j.Output, &j.Error} {
			if *p != "" && !filepath.IsAbs(*p) {
				*p = filepath.Join(j.Workdir, *p)
			}
		}
	}
	if j.Workdir != "/" {
		// The node's tree is read-only in a container; the submit
		// directory is where a job writes, as on a shared file system.
		j.Mounts = []jobspec.Mount{{Name: "cwd", Source: j.Workdir, Target: j.Workdir}}
	}
	j.Image = o.Image
	if j.Image == "" {
		j.Image = s.DefaultImage
	}
	if j.Image == "" {
		j.Image = "host"
	}
	j.Env = o.environment(s.Environ)
	if o.Mail.Wanted() {
		m := *o.Mail
		j.Mail = &m
	}
	w, err := o.warning()
	if err != nil {
		return nil, err
	}
	j.Signal = w
	return j, nil
}

// JobName makes name a troupe job name: each other character becomes
// '_', and a name too long keeps its end (where workflow tools put the
// run's id that they later match with bjobs -J '*id*').
func JobName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r == '.' || r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	n := b.String()
	if len(n) > maxName {
		n = n[len(n)-maxName:]
	}
	n = strings.TrimLeft(n, "._-")
	if n == "" {
		return "job"
	}
	return n
}

// maxName is the longest job name jobspec takes.
const maxName = 63

// defaultName is LSF's: the command (its first word, base name), or the
// script's file name; "stdin" for a script from stdin.
func defaultName(s Submit) string {
	name := s.Name
	if s.Script == nil && len(s.Command) > 0 {
		name = strings.Fields(s.Command[0] + " x")[0]
	}
	name = path.Base(name)
	if name == "" || name == "." || name == "/" {
		name = "stdin"
	}
	return JobName(name)
}

// shape maps slots, nodes and tasks to the cluster and its containers'
// resources; see troupe-job(5), SCRIPT JOBS.
func (o *Options) shape(j *jobspec.Job) {
	slots := max(o.Slots, 1)
	cpt := max(o.CPUsPerTask, 1)
	size, perContainer := 1, slots
	switch {
	case o.OneHost:
	case o.TasksPerNode > 0:
		size = (slots + o.TasksPerNode - 1) / o.TasksPerNode
		if o.Nodes > 0 {
			size = o.Nodes
		}
		perContainer = o.TasksPerNode
		if o.Slots == 0 {
			// --ntasks-per-node without --ntasks: that many per node.
			perContainer = o.TasksPerNode
		}
	case o.Nodes > 0:
		size = o.Nodes
		perContainer = (slots + o.Nodes - 1) / o.Nodes
	}
	j.Cluster = jobspec.Cluster{Size: size, Mode: jobspec.ModeSingleNode}
	if size > 1 {
		j.Cluster.Mode = jobspec.ModeMultiNode
	}
	cpu := float64(perContainer * cpt)
	j.Resources = jobspec.Resources{CPU: cpu, Memory: jobspec.DefaultMemory, GPU: o.GPU}
	// The largest of the memory asked for per container, per slot (LSF's
	// rusage[mem], reserved per task as RESOURCE_RESERVE_PER_TASK=Y,
	// which badmin showconf reports) and per cpu (Slurm's).
	if m := max(o.Memory, o.MemPerSlot*int64(perContainer), o.MemPerCPU*int64(perContainer*cpt)); m > 0 {
		j.Resources.Memory = m
	}
}

// environment is the job's env under o's policy.
func (o *Options) environment(environ []string) map[string]string {
	pol := o.Env
	if !pol.Set {
		pol.All = true // LSF's -env all and Slurm's --export=ALL
	}
	env := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		// SLURM_* describe the submitter's own job, if any (as
		// BACKENDAI_*): each container gets its job's.
		// A troupe credential (TROUPE_TOKEN) authenticates the
		// submitter, not the job: never copied, even when named.
		if !ok || notPassed[k] || jobspec.CredentialEnv(k) || !envName().MatchString(k) || strings.HasPrefix(k, "BACKENDAI_") || strings.HasPrefix(k, "SLURM_") || strings.IndexByte(v, 0) >= 0 {
			continue
		}
		if pol.All && !slices.Contains(pol.Exclude, k) || !pol.All && slices.Contains(pol.Names, k) {
			env[k] = v
		}
	}
	for k, v := range pol.Values {
		env[k] = v
	}
	if o.CPUsPerTask > 0 {
		// Slurm's -c: the containers' SLURM_NTASKS count tasks of this
		// many cores, and srun starts that many.
		env["SLURM_CPUS_PER_TASK"] = strconv.Itoa(o.CPUsPerTask)
	}
	if len(env) == 0 {
		return nil
	}
	return env
}

// shells take the script's text after -c, then $0 and the arguments.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "ksh": true, "zsh": true, "mksh": true, "ash": true}

// inline are interpreters that take a program's text as an argument.
var inline = map[string]string{"python": "-c", "perl": "-e", "Rscript": "-e", "ruby": "-e", "node": "-e"}

// command is main1's command for the script: its interpreter given the
// script's text, as LSF and Slurm run a copy of the script.
func (s *Script) command(name string, args []string) ([]string, error) {
	interp := s.Interpreter
	if len(interp) == 0 {
		interp = []string{"/bin/sh"}
	}
	prog := path.Base(interp[0])
	if prog == "env" && len(interp) > 1 {
		rest := interp[1:]
		if rest[0] == "-S" {
			rest = rest[1:]
		}
		if len(rest) == 0 {
			return nil, fmt.Errorf("%w: line 1: #!%s names no program", ErrScript, strings.Join(interp, " "))
		}
		interp = append([]string{interp[0]}, rest...)
		prog = path.Base(rest[0])
	}
	if name == "" {
		name = "stdin"
	}
	text := string(s.Src)
	switch {
	case shells[prog]:
		cmd := append(slices.Clone(interp), "-c", text, name)
		return append(cmd, args...), nil
	case inline[versionless(prog)] != "":
		cmd := append(slices.Clone(interp), inline[versionless(prog)], text)
		return append(cmd, args...), nil
	}
	return nil, fmt.Errorf("%w: line 1: interpreter %s: troupe runs scripts of sh, bash, zsh, ksh, python, perl, Rscript, ruby or node; wrap it in a shell script", ErrScript, interp[0])
}

// versionless is prog without a version suffix: python3.11 is python.
func versionless(prog string) string {
	return strings.TrimRightFunc(prog, func(r rune) bool { return r == '.' || r >= '0' && r <= '9' })
}
