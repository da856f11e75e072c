package jobspec

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/troupe-hpc/troupe/internal/units"
)

// Limits checked by Validate. MaxCPU, MaxMemory and MaxGPU bound what
// one container may ask for: more than any node offers, so a value above
// them is a mistake (1e308 cpus) that no node could ever run.
const (
	MinPriority    = -10000  // the lowest nice a user may give
	MaxCPU         = 65536   // cores per container
	MaxMemory      = 1 << 50 // bytes per container (1 PiB)
	MaxGPU         = 64      // GPUs per container; a node offers at most as many
	MaxServices    = 16      // service blocks per job
	maxNameLen     = 63
	maxRoleNameLen = 32
	maxPathLen     = 4096 // PATH_MAX
)

// MaxClusterSize is the most containers one job's session may have:
// the session's network is one /24, whose .1 is the gateway and .255 the
// broadcast address, leaving .2 to .254 for the containers. It is the
// one bound on a session's size; schedd's partitions may only lower it
// (max_cluster_size).
const MaxClusterSize = 253

// MinCPU is the least cpu, in cores, a container may ask for: 0.01, the
// kernel's smallest CPU quota (units.MinCPUMilli millicores). A cpu is
// judged as the millicores it becomes (units.MilliCPU), the value schedd
// schedules and the node enforces.
const MinCPU = float64(units.MinCPUMilli) / 1000

// Names are checked byte by byte against their rules rather than with
// regexps: compiling `{0,254}` alone took a quarter of a millisecond,
// paid at the start of every bsub.
const (
	lowers    = "abcdefghijklmnopqrstuvwxyz"
	letters   = lowers + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	alnum     = letters + "0123456789"
	alnumDash = alnum + "_-"
)

var (
	jobNameRule  = nameRule{first: alnum, rest: alnum + "_.-"}
	roleNameRule = nameRule{first: lowers, rest: lowers}
	serviceRule  = nameRule{first: lowers, rest: lowers + "0123456789-", max: 32}
	mountRule    = nameRule{first: letters, rest: alnumDash}
	envKeyRule   = nameRule{first: letters + "_", rest: alnum + "_"}
	// partRule is a partition or account name, as partitions.hcl takes it.
	partRule = nameRule{first: letters, rest: alnumDash, max: 63}
	// imageNameRule is a catalog image name (internal/catalog's rule).
	imageNameRule = nameRule{first: alnum, rest: alnum + "_.:-", max: 255}
)

// A nameRule is the syntax of a name: one byte of first, then any number
// of bytes of rest, at most max bytes in all (0: no bound).
type nameRule struct {
	first, rest string
	max         int
}

// ok reports whether s follows r.
func (r nameRule) ok(s string) bool {
	if s == "" || (r.max > 0 && len(s) > r.max) || strings.IndexByte(r.first, s[0]) < 0 {
		return false
	}
	for i := 1; i < len(s); i++ {
		if strings.IndexByte(r.rest, s[i]) < 0 {
			return false
		}
	}
	return true
}

// Range returns where the setting at path (a JSON path such as
// "cluster.size", "resources.gpu", "env.EPOCHS", "mounts.0.target" or
// "roles.1.replicas") was written. A setting the file left out falls
// back to its enclosing block, then to the job block's header; nil means
// the Job carries no ranges (it did not come from Parse). The result is
// fit for hcl.Diagnostic.Subject.
func (j *Job) Range(path string) *hcl.Range {
	if j.Ranges == nil {
		return nil
	}
	for {
		if r, ok := j.Ranges[path]; ok {
			return &r
		}
		if path == "" {
			return nil
		}
		i := strings.LastIndexByte(path, '.')
		if i < 0 {
			i = 0
		}
		path = path[:i]
	}
}

// Validate checks the rules a job must follow whatever its source (a
// file through Parse, or JSON through the API) and returns an error for
// each broken one, pointing at the setting through Range. Parse calls it;
// a Job from elsewhere should be validated before it is used.
func (j *Job) Validate() hcl.Diagnostics {
	return j.validate(nil)
}

// validate is Validate, quiet about the settings at the paths in skip
// (and below them): the decoder has reported those already.
func (j *Job) validate(skip map[string]bool) hcl.Diagnostics {
	v := &validator{j: j, skip: skip}
	v.name()
	v.top()
	v.cluster()
	v.resources("resources", j.Resources, false)
	v.command("command", j.Command)
	v.env()
	v.mounts()
	v.pattern("output", v.j.Output)
	v.pattern("error", v.j.Error)
	v.roles()
	v.services()
	v.array()
	v.mail()
	v.warning()
	v.licenses()
	return v.diags
}

// array checks the array block: a range ParseIndices reads, without a
// throttle (that is max_running), and max_running ≥ 0.
func (v *validator) array() {
	a := v.j.Array
	if a == nil {
		return
	}
	switch _, throttle, err := ParseIndices(a.Range); {
	case err != nil:
		v.errorf("array.range", "Invalid array range", "%s.", err)
	case throttle > 0:
		v.errorf("array.range", "Invalid array range",
			"array range %q carries a throttle; in a job file write it as max_running = %d.", a.Range, throttle)
	}
	if a.MaxRunning < 0 {
		v.errorf("array.max_running", "Invalid max_running",
			"max_running %d is not valid; give the most elements that may run at once (at least 1), or 0 for no limit.", a.MaxRunning)
	}
}

type validator struct {
	j     *Job
	skip  map[string]bool
	diags hcl.Diagnostics
}

func (v *validator) errorf(path, summary, detail string, args ...any) {
	if v.skipped(path) {
		return
	}
	v.diags = append(v.diags, errorAt(v.j.Range(path), summary, detail, args...))
}

func (v *validator) name() {
	n := v.j.Name
	if n == "" || len(n) > maxNameLen || !jobNameRule.ok(n) {
		v.errorf("name", "Invalid job name",
			"job name %q is not valid; use 1 to %d letters, digits, '.', '_' or '-', starting with a letter or digit.", n, maxNameLen)
	}
}

func (v *validator) top() {
	j := v.j
	if j.Walltime < 0 {
		v.errorf("walltime", "Invalid walltime", "walltime %s is negative; give a positive limit such as \"2h\".", j.Walltime)
	}
	if j.Priority > 0 || j.Priority < MinPriority {
		v.errorf("priority", "Invalid priority",
			"priority %d is not valid; like Slurm's --nice, a user may only lower a job's priority: use 0 (the default) down to %d.",
			j.Priority, MinPriority)
	}
	if j.Image == "" {
		v.errorf("image", "Missing image",
			`a job needs an image: image = "NAME", a catalog alias, "host", a rootfs directory, a .sif file or an OCI layout or archive.`)
	} else {
		v.image("image", j.Image)
	}
	if j.Workdir != "" && !path.IsAbs(j.Workdir) {
		v.errorf("workdir", "Invalid workdir", "workdir %q is not valid; it must be an absolute path such as %q.", j.Workdir, DefaultWorkdir)
	} else {
		v.path("workdir", "workdir", j.Workdir)
	}
	for _, f := range []struct{ path, val string }{{"partition", j.Partition}, {"account", j.Account}, {"reservation", j.Reservation}, {"qos", j.QOS}} {
		if f.val != "" && !partRule.ok(f.val) {
			v.errorf(f.path, "Invalid "+f.path,
				"%s %q is not valid; a %s name starts with a letter and holds up to 63 letters, digits, '_' and '-'.", f.path, f.val, f.path)
		}
	}
	if j.mainCommand() == nil {
		v.errorf("command", "Missing command",
			`main1 has no command; give the job one: command = ["python", "train.py"] (or a role "main" block with a command).`)
	}
}

func (v *validator) cluster() {
	c := v.j.Cluster
	if c.Size < 1 || c.Size > MaxClusterSize {
		v.errorf("cluster.size", "Invalid cluster size",
			"cluster size %d is not valid; use 1 (main1 alone) to %d containers, the most one session's network holds.", c.Size, MaxClusterSize)
	}
	if c.Mode != ModeSingleNode && c.Mode != ModeMultiNode {
		v.errorf("cluster.mode", "Invalid cluster mode",
			"cluster mode %q is not valid; use %q or %q.", c.Mode, ModeSingleNode, ModeMultiNode)
	}
}

// resources checks a resources setting at path. inherit allows a zero
// CPU or Memory (a role's, taken from the job's).
func (v *validator) resources(path string, r Resources, inherit bool) {
	if bad(r.CPU) || r.CPU < 0 || (r.CPU == 0 && !inherit) || r.CPU > MaxCPU {
		v.errorf(path+".cpu", "Invalid cpu",
			"cpu %g is not valid; give the cores each container needs, more than 0 and at most %d (fractions such as 0.5 are fine).", r.CPU, MaxCPU)
	} else if r.CPU > 0 && units.MilliCPU(r.CPU) < units.MinCPUMilli {
		v.errorf(path+".cpu", "Invalid cpu",
			"cpu %g is not valid; the least a container may have is %g (%d millicores, the smallest CPU quota the kernel enforces).",
			r.CPU, MinCPU, units.MinCPUMilli)
	}
	if r.Memory < 0 || (r.Memory == 0 && !inherit) || r.Memory > MaxMemory {
		v.errorf(path+".memory", "Invalid memory",
			`memory %d is not valid; give the memory each container needs, more than 0 and at most 1PiB, such as "16GiB".`, r.Memory)
	}
	switch {
	case bad(r.GPU) || r.GPU < 0 || r.GPU > MaxGPU:
		v.errorf(path+".gpu", "Invalid gpu",
			"gpu %g is not valid; use 0 (none), a fraction of one GPU (0 < gpu <= 1), or a whole number of GPUs up to %d.", r.GPU, MaxGPU)
	case r.GPU > 1 && r.GPU != math.Trunc(r.GPU):
		v.errorf(path+".gpu", "Invalid gpu",
			"gpu %g is not valid; a request above one GPU must be whole (%g or %g); fractions are for one shared GPU (0 < gpu <= 1).",
			r.GPU, math.Floor(r.GPU), math.Ceil(r.GPU))
	}
}

func bad(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }

func (v *validator) command(path string, cmd []string) {
	if len(cmd) > 0 && cmd[0] == "" {
		v.errorf(path+".0", "Invalid command", "the program name, %s[0], is empty; name a program such as \"python\".", path)
	}
	for i, a := range cmd {
		if strings.IndexByte(a, 0) >= 0 {
			v.errorf(fmt.Sprintf("%s.%d", path, i), "Invalid command",
				"%s[%d] holds a NUL byte, which no program can receive in its arguments; remove it.", path, i)
		}
	}
}

// path checks a path setting (at path; what names it in messages) that
// must name a file: no NUL byte, at most PATH_MAX bytes.
func (v *validator) path(at, what, p string) {
	switch {
	case strings.IndexByte(p, 0) >= 0:
		v.errorf(at, "Invalid "+what, "%s %q holds a NUL byte, which no path can; remove it.", what, p)
	case len(p) > maxPathLen:
		v.errorf(at, "Invalid "+what, "%s is %d bytes long; a path may be at most %d.", what, len(p), maxPathLen)
	}
}

// image checks an image reference (at path): "host", an absolute path
// without ".." (a rootfs, layout, archive or .sif on the nodes), or a
// catalog name. A relative path such as "../../etc" is none of these.
func (v *validator) image(at, im string) {
	switch {
	case im == "host":
	case strings.HasPrefix(im, "/"):
		if slices.Contains(strings.Split(im, "/"), "..") {
			v.errorf(at, "Invalid image", "image %q climbs out with \"..\"; give the image's path without \"..\", such as %q.", im, path.Clean(im))
			return
		}
		v.path(at, "image", im)
	case !imageNameRule.ok(im):
		v.errorf(at, "Invalid image",
			"image %q is not valid; use \"host\", an absolute path on the nodes, or a catalog name (up to 255 letters, digits, '.', '_', '-' and ':', starting with a letter or digit).", im)
	}
}

// credentialEnv are the environment variables a troupe client takes its
// credentials from (the bearer token; internal/client reads them). They
// authenticate the submitter to schedd: copied into a job they would sit
// in the raft log, the snapshots and every container's environment,
// readable by any code the job runs. Submit tools leave them out of the
// environment they copy, and Validate refuses a job that names one, so
// that schedd's admission keeps them out of the log whatever the client.
var credentialEnv = []string{"TROUPE_TOKEN"}

// CredentialEnv reports whether name is an environment variable that
// holds a troupe client's credential (see credentialEnv).
func CredentialEnv(name string) bool { return slices.Contains(credentialEnv, name) }

func (v *validator) env() {
	for _, k := range sortedKeys(v.j.Env) {
		switch {
		case !envKeyRule.ok(k):
			v.errorf("env."+k, "Invalid environment variable name",
				"env %q is not a valid variable name; use letters, digits and _, not starting with a digit.", k)
		case CredentialEnv(k):
			v.errorf("env."+k, "Credential in the environment",
				"env %s holds a troupe client's credential, which a job never carries (the raft log and every process in the job would hold it in clear); remove it, and give the job a token of its own through a file it reads if it must call schedd.", k)
		case strings.HasPrefix(k, "BACKENDAI_"):
			v.errorf("env."+k, "Reserved environment variable",
				"env %s is set by troupe in every container; choose a name that does not start with BACKENDAI_.", k)
		case strings.IndexByte(v.j.Env[k], 0) >= 0:
			v.errorf("env."+k, "Invalid environment variable value",
				"env %s holds a NUL byte, which no environment variable can; remove it.", k)
		}
	}
}

// forbiddenTargets are what a mount may not cover: kernel filesystems
// and troupe's own files in every container (/.troupe holds troupe-init,
// the container's first process). By name only: the node checks again
// where a target leads through the image's symbolic links.
var forbiddenTargets = []string{"/proc", "/sys", "/dev", "/.troupe", "/etc/hosts", "/etc/hostname"}

func (v *validator) mounts() {
	names := map[string]int{}
	targets := map[string]int{}
	for i, m := range v.j.Mounts {
		p := fmt.Sprintf("mounts.%d", i)
		if !mountRule.ok(m.Name) {
			v.errorf(p+".name", "Invalid mount name",
				"mount name %q is not valid; use letters, digits, '_' and '-', starting with a letter.", m.Name)
		} else if first, dup := names[m.Name]; dup {
			v.errorf(p+".name", "Duplicate mount name",
				"mount %q is already defined%s; give each mount its own name.", m.Name, v.at(fmt.Sprintf("mounts.%d", first)))
		} else {
			names[m.Name] = i
		}
		if !path.IsAbs(m.Source) {
			v.errorf(p+".source", "Invalid mount source",
				"mount %q source %q is not valid; it must be an absolute path on the nodes, such as \"/shared/datasets\".", m.Name, m.Source)
		} else {
			v.path(p+".source", fmt.Sprintf("mount %q source", m.Name), m.Source)
		}
		v.mountTarget(p, m, i, targets)
	}
}

func (v *validator) mountTarget(p string, m Mount, i int, targets map[string]int) {
	t := path.Clean(m.Target)
	switch {
	case !path.IsAbs(m.Target):
		v.errorf(p+".target", "Invalid mount target",
			"mount %q target %q is not valid; it must be an absolute path in the container, such as %q.", m.Name, m.Target, DefaultWorkdir+"/data")
		return
	case t == "/":
		v.errorf(p+".target", "Invalid mount target",
			"mount %q target %q would hide the image's root; mount at a folder such as %q.", m.Name, m.Target, DefaultWorkdir+"/data")
		return
	}
	for _, f := range forbiddenTargets {
		if t == f || strings.HasPrefix(t, f+"/") {
			where := "is inside"
			if t == f {
				where = "is"
			}
			v.errorf(p+".target", "Invalid mount target",
				"mount %q target %q %s %s, which troupe sets up; mount elsewhere, such as %q.", m.Name, m.Target, where, f, DefaultWorkdir+"/data")
			return
		}
	}
	if first, dup := targets[t]; dup {
		v.errorf(p+".target", "Duplicate mount target",
			"mount %q target %q is already used by mount %q%s; give each mount its own target.",
			m.Name, m.Target, v.j.Mounts[first].Name, v.at(fmt.Sprintf("mounts.%d.target", first)))
		return
	}
	v.path(p+".target", fmt.Sprintf("mount %q target", m.Name), m.Target)
	targets[t] = i
}

// skipped says whether path or a prefix of it is in skip.
func (v *validator) skipped(path string) bool {
	for p := path; len(v.skip) > 0; {
		if v.skip[p] {
			return true
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
	return false
}

// at writes " at file:line:col" for the setting at path, if known.
func (v *validator) at(path string) string {
	if r := v.j.Range(path); r != nil {
		return " at " + posString(*r)
	}
	return ""
}

// pattern checks the output or error file pattern o (at path).
func (v *validator) pattern(path, o string) {
	v.path(path, path, o)
	for i := 0; i < len(o); i++ {
		if o[i] != '%' {
			continue
		}
		esc := "%"
		if i+1 < len(o) {
			esc = o[i : i+2]
			if strings.IndexByte(outputEscapes, o[i+1]) >= 0 {
				i++
				continue
			}
		}
		what := fmt.Sprintf("holds %q, which is not a valid escape", esc)
		if esc == "%" {
			what = "ends with a lone %"
		}
		v.diags = append(v.diags, errorAt(v.within(path, o, i, len(esc)), "Invalid "+path+" pattern",
			path+" %q %s; use %%j (job id), %%h (container host), %%u (user), %%I or %%a (array index), %%A (array job id) or %%%% (a literal %%).", o, what))
	}
}

// within narrows the range of the string s at path to its bytes
// [i, i+n) when s is written as a plain one-line literal (quotes, then s
// verbatim); otherwise it is the whole value's range.
func (v *validator) within(path, s string, i, n int) *hcl.Range {
	r, ok := v.j.Ranges[path]
	if !ok {
		return v.j.Range(path)
	}
	plain := r.Start.Line == r.End.Line && r.End.Byte-r.Start.Byte == len(s)+2
	for _, c := range []byte(s) {
		plain = plain && c >= 0x20 && c < 0x7f
	}
	if !plain {
		return &r
	}
	r.Start.Byte += 1 + i
	r.Start.Column += 1 + i
	r.End = r.Start
	r.End.Byte += n
	r.End.Column += n
	return &r
}

func (v *validator) roles() {
	j := v.j
	seen := map[string]int{}
	others := 0
	for i, r := range j.Roles {
		p := fmt.Sprintf("roles.%d", i)
		if len(r.Name) > maxRoleNameLen || !roleNameRule.ok(r.Name) {
			v.errorf(p+".name", "Invalid role name",
				"role name %q is not valid; use 1 to %d lowercase letters (hosts are named role+index, like worker1).", r.Name, maxRoleNameLen)
		} else if first, dup := seen[r.Name]; dup {
			v.errorf(p+".name", "Duplicate role",
				"role %q is already defined%s; give each role one block.", r.Name, v.at(fmt.Sprintf("roles.%d", first)))
		}
		seen[r.Name] = i
		switch {
		case r.Name == RoleMain && r.Replicas != 0 && r.Replicas != 1:
			v.errorf(p+".replicas", "Invalid replicas",
				"role main has exactly one container, main1; remove replicas or set it to 1 (use cluster size or role \"sub\" for more).")
		case r.Replicas < 0:
			v.errorf(p+".replicas", "Invalid replicas", "role %q replicas %d is not valid; use 0 or more.", r.Name, r.Replicas)
		case r.Name != RoleMain && r.Name != RoleSub:
			others += r.Replicas
		}
		if r.Resources != nil {
			v.resources(p+".resources", *r.Resources, true)
		}
		v.command(p+".command", r.Command)
		if r.Image != "" {
			v.image(p+".image", r.Image)
		}
	}
	subs := j.Cluster.Size - 1 - others
	if subs < 0 && j.Cluster.Size >= 1 {
		v.errorf("cluster.size", "Cluster size does not match roles",
			"cluster size %d is too small: main1 and the other roles' %d replicas need %d containers.", j.Cluster.Size, others, others+1)
	} else if i, ok := seen[RoleSub]; ok && j.Roles[i].Replicas > 0 && j.Roles[i].Replicas != subs {
		v.errorf("cluster.size", "Cluster size does not match roles",
			"cluster size %d leaves %d sub containers, but role sub has replicas = %d; set size = %d.",
			j.Cluster.Size, subs, j.Roles[i].Replicas, j.Cluster.Size-subs+j.Roles[i].Replicas)
	}
}

func (v *validator) services() {
	names := map[string]int{}
	ports := map[int]int{}
	if n := len(v.j.Services); n > MaxServices {
		v.errorf(fmt.Sprintf("services.%d", MaxServices), "Too many services",
			"the job declares %d services; a job may declare at most %d.", n, MaxServices)
	}
	for i, s := range v.j.Services {
		p := fmt.Sprintf("services.%d", i)
		if !serviceRule.ok(s.Name) {
			v.errorf(p+".name", "Invalid service name",
				"service name %q is not valid; use 1 to 32 lowercase letters, digits and '-', starting with a letter (it is a part of the URL /apps/JOB/NAME/).", s.Name)
		} else if first, dup := names[s.Name]; dup {
			v.errorf(p+".name", "Duplicate service name",
				"service %q is already defined%s; give each service its own name.", s.Name, v.at(fmt.Sprintf("services.%d", first)))
		} else {
			names[s.Name] = i
		}
		if s.Port < 1 || s.Port > 65535 {
			v.errorf(p+".port", "Invalid service port",
				"service %q port %d is not valid; use the TCP port main1 serves it on, 1 to 65535.", s.Name, s.Port)
		} else if first, dup := ports[s.Port]; dup {
			v.errorf(p+".port", "Duplicate service port",
				"service %q port %d is already service %q's%s; declare each port once.", s.Name, s.Port, v.j.Services[first].Name, v.at(fmt.Sprintf("services.%d.port", first)))
		} else {
			ports[s.Port] = i
		}
		if s.Protocol != "" && s.Protocol != ProtocolHTTP {
			v.errorf(p+".protocol", "Invalid service protocol",
				"service %q protocol %q is not valid; schedd proxies %q (WebSocket included) only.", s.Name, s.Protocol, ProtocolHTTP)
		}
	}
}
