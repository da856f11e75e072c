package cli

import (
	"fmt"
	"math"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// squeue -O (--Format) names its fields: "JobID,State:10,Name:.30|".
// Each is TYPE[:[.][SIZE][SUFFIX]]: without a colon the field is 20
// wide, with one SIZE (none: 0, the value as it is) and "." right-
// justifies; SUFFIX is written after the field. Field names are matched
// without regard to case.

// squeueLongField is one -O field: its header and value; mem is set
// for the memory fields, whose value --noconvert changes.
type squeueLongField struct {
	title string
	value func(j api.Job, now time.Time) string
	mem   func(j api.Job, noconvert bool) string
}

func fieldOf(c byte) func(api.Job, time.Time) string { return squeueFields[c].value }

func constant(v string) func(api.Job, time.Time) string {
	return func(api.Job, time.Time) string { return v }
}

// squeueLongFields are the -O fields troupe knows: Slurm's, with what
// troupe has for each (a field that means nothing for a troupe job shows
// Slurm's value for one without it: "(null)", "N/A", "*" or 0).
var squeueLongFields = map[string]squeueLongField{
	"account":     {"ACCOUNT", fieldOf('a'), nil},
	"arrayjobid":  {"ARRAY_JOB_ID", fieldOf('F'), nil},
	"arraytaskid": {"ARRAY_TASK_ID", fieldOf('K'), nil},
	"batchhost": {"EXEC_HOST", func(j api.Job, _ time.Time) string {
		if n := JobNodes(j); len(n) > 0 {
			return n[0]
		}
		return "n/a"
	}, nil},
	"command": {"COMMAND", func(j api.Job, _ time.Time) string {
		if len(j.Spec.Command) > 0 {
			return strings.Join(j.Spec.Command, " ")
		}
		return "(null)"
	}, nil},
	"comment":    {"COMMENT", constant("(null)"), nil},
	"contiguous": {"CONTIGUOUS", constant("0"), nil},
	"cores":      {"CORES_PER_SOCKET", constant("*"), nil},
	"corespec":   {"CORE_SPEC", constant("N/A"), nil},
	"dependency": {"DEPENDENCY", func(j api.Job, _ time.Time) string { return SlurmDependency(j.DependsOn) }, nil},
	"endtime": {"END_TIME", func(j api.Job, now time.Time) string {
		switch {
		case !j.Ended.IsZero():
			return slurmTime(j.Ended, now)
		case !j.Started.IsZero() && j.Walltime > 0:
			return slurmTime(j.Started.Add(j.Walltime), now)
		}
		return "N/A"
	}, nil},
	"excnodes": {"EXC_NODES", constant(""), nil},
	"feature":  {"FEATURES", constant("(null)"), nil},
	"groupid":  {"GROUP", func(j api.Job, _ time.Time) string { return strconv.Itoa(j.GID) }, nil},
	"groupname": {"GROUP", func(j api.Job, _ time.Time) string {
		if g, err := user.LookupGroupId(strconv.Itoa(j.GID)); err == nil {
			return g.Name
		}
		return strconv.Itoa(j.GID)
	}, nil},
	"jobarrayid": {"JOBID", fieldOf('i'), nil},
	"jobid":      {"JOBID", fieldOf('i'), nil},
	"licenses":   {"LICENSES", fieldOf('W'), nil},
	"mincpus": {"MIN_CPUS", func(j api.Job, _ time.Time) string {
		return strconv.Itoa(max(int(math.Ceil(j.Spec.Resources.CPU)), 1))
	}, nil},
	"minmemory": {"MIN_MEMORY", nil, func(j api.Job, noconvert bool) string {
		return slurmMemory(j.Spec.Resources.Memory, noconvert)
	}},
	"mintmpdisk":    {"MIN_TMP_DISK", constant("0"), nil},
	"name":          {"NAME", fieldOf('j'), nil},
	"nice":          {"NICE", func(j api.Job, _ time.Time) string { return strconv.Itoa(-j.Spec.Priority) }, nil},
	"nodelist":      {"NODELIST", fieldOf('N'), nil},
	"numcpus":       {"CPUS", fieldOf('C'), nil},
	"numnodes":      {"NODES", fieldOf('D'), nil},
	"numtasks":      {"TASKS", func(j api.Job, _ time.Time) string { return strconv.Itoa(max(JobSize(j), 1)) }, nil},
	"oversubscribe": {"OVER_SUBSCRIBE", constant("OK"), nil},
	"partition":     {"PARTITION", fieldOf('P'), nil},
	"priority":      {"PRIORITY", func(j api.Job, _ time.Time) string { return strconv.FormatFloat(j.Priority, 'f', 8, 64) }, nil},
	"prioritylong": {"PRIORITY", func(j api.Job, _ time.Time) string {
		return strconv.FormatInt(int64(math.Round(j.Priority)), 10)
	}, nil},
	"qos":          {"QOS", constant("normal"), nil},
	"reason":       {"REASON", fieldOf('r'), nil},
	"reasonlist":   {"NODELIST(REASON)", fieldOf('R'), nil},
	"reqnodes":     {"REQ_NODES", constant(""), nil},
	"reservation":  {"RESERVATION", constant("(null)"), nil},
	"schednodes":   {"SCHEDNODES", constant("(null)"), nil},
	"sct":          {"S:C:T", constant("*:*:*"), nil},
	"sockets":      {"SOCKETS_PER_NODE", constant("*"), nil},
	"starttime":    {"START_TIME", fieldOf('S'), nil},
	"state":        {"STATE", fieldOf('T'), nil},
	"statecompact": {"ST", fieldOf('t'), nil},
	"submittime":   {"SUBMIT_TIME", fieldOf('V'), nil},
	"threads":      {"THREADS_PER_CORE", constant("*"), nil},
	"timeleft": {"TIME_LEFT", func(j api.Job, now time.Time) string {
		if j.Walltime <= 0 {
			return "UNLIMITED"
		}
		used := time.Duration(0)
		if !j.Started.IsZero() {
			used = JobTime(j, now)
		}
		return Elapsed(max(j.Walltime-used, 0))
	}, nil},
	"timelimit": {"TIME_LIMIT", fieldOf('l'), nil},
	"timeused":  {"TIME", fieldOf('M'), nil},
	"tres-alloc": {"TRES_ALLOC", nil, func(j api.Job, noconvert bool) string {
		if len(j.Containers) == 0 || j.Containers[0].Node == "" {
			return ""
		}
		return slurmTRES(j, noconvert)
	}},
	"tres-per-node": {"TRES_PER_NODE", func(j api.Job, _ time.Time) string {
		if g := j.Spec.Resources.GPU; g > 0 {
			return "gres:gpu:" + strconv.Itoa(int(math.Ceil(g)))
		}
		return "N/A"
	}, nil},
	"userid":   {"UID", func(j api.Job, _ time.Time) string { return strconv.Itoa(j.UID) }, nil},
	"username": {"USER", fieldOf('u'), nil},
	"wckey":    {"WCKEY", constant("(null)"), nil},
	"workdir":  {"WORK_DIR", fieldOf('Z'), nil},
}

// slurmMemory writes bytes as Slurm writes a memory size in megabytes:
// "4G" when it is whole gigabytes, else "4000M"; with --noconvert always
// in megabytes.
func slurmMemory(bytes int64, noconvert bool) string {
	mb := bytes >> 20
	if !noconvert && mb > 0 && mb%1024 == 0 {
		return strconv.FormatInt(mb/1024, 10) + "G"
	}
	return strconv.FormatInt(mb, 10) + "M"
}

// slurmTRES is a placed job's trackable resources as Slurm writes them:
// "cpu=4,mem=8G,node=1[,gres/gpu=2]".
func slurmTRES(j api.Job, noconvert bool) string {
	var cpu, gpu float64
	var mem int64
	for _, c := range j.Containers {
		cpu += c.Resources.CPU
		gpu += c.Resources.GPU
		mem += c.Resources.Memory
	}
	s := fmt.Sprintf("cpu=%d,mem=%s,node=%d", int(math.Ceil(cpu)), slurmMemory(mem, noconvert), max(len(JobNodes(j)), 1))
	if gpu > 0 {
		s += fmt.Sprintf(",gres/gpu=%d", int(math.Ceil(gpu)))
	}
	return s
}

// SlurmDependency writes d as squeue's %E does: "afterok:12,afterany:13"
// ('?' between terms of an any-of), "(null)" for none.
func SlurmDependency(d *api.Dependency) string {
	if d == nil || len(d.Conditions) == 0 {
		return "(null)"
	}
	parts := make([]string, len(d.Conditions))
	for i, c := range d.Conditions {
		k := c.Kind.Slurm()
		if k == "" {
			k = string(c.Kind)
		}
		id := strconv.FormatUint(c.JobID, 10)
		if c.Index != nil {
			id += "_" + strconv.Itoa(*c.Index)
		}
		parts[i] = k + ":" + id
	}
	sep := ","
	if d.Any {
		sep = "?"
	}
	return strings.Join(parts, sep)
}

// squeueLongNames lists the -O fields, for messages and help.
func squeueLongNames() string {
	var ns []string
	for n := range squeueLongFields {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return strings.Join(ns, ",")
}

// ParseSqueueLongFormat reads squeue's -O (--Format); noconvert
// (--noconvert) keeps memory sizes in megabytes.
func ParseSqueueLongFormat(s string, noconvert bool) (SqueueFormat, error) {
	var f SqueueFormat
	for item := range strings.SplitSeq(s, ",") {
		if item == "" {
			continue
		}
		name, spec, hasSpec := strings.Cut(item, ":")
		fld, ok := squeueLongFields[strings.ToLower(strings.TrimSpace(name))]
		if !ok {
			//lint:ignore ST1005 Slurm's squeue words it so, and tools match it
			return nil, fmt.Errorf("Invalid job format specification: %s; troupe's squeue -O knows %s", name, squeueLongNames())
		}
		it := squeueItem{field: squeueField{title: fld.title, value: fld.value}, width: 20}
		if fld.mem != nil {
			mem := fld.mem
			it.field.value = func(j api.Job, _ time.Time) string { return mem(j, noconvert) }
		}
		var suffix string
		if hasSpec {
			if rest, ok := strings.CutPrefix(spec, "."); ok {
				it.right, spec = true, rest
			}
			digits := len(spec) - len(strings.TrimLeft(spec, "0123456789"))
			it.width = 0
			if digits > 0 {
				it.width, _ = strconv.Atoi(spec[:digits])
			}
			suffix = spec[digits:]
		}
		f = append(f, it)
		if suffix != "" {
			f = append(f, squeueItem{literal: suffix})
		}
	}
	if len(f) == 0 {
		//lint:ignore ST1005 Slurm's squeue words it so, and tools match it
		return nil, fmt.Errorf("Invalid job format specification: %q names no field", s)
	}
	return f, nil
}
