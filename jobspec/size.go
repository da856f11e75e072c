package jobspec

import (
	"fmt"
	"strconv"

	"github.com/hashicorp/hcl/v2"
)

// DefaultMaxInput is how many bytes of text (commands, environment,
// mounts, paths and names) schedd takes in one job unless its
// max_job_input says otherwise: far below the API's body limit, so that
// one user cannot fill the controller's memory and raft log with a few
// jobs. Large data belongs in files, passed by path.
const DefaultMaxInput = 64 << 10

// InputPart is one setting's share of a job's InputSize.
type InputPart struct {
	Path  string // the setting's JSON path, as Range takes it: "env.DATA", "command.2"
	Bytes int
}

// InputSize is what the job's text costs schedd to keep: every string
// setting, one byte more for each (its terminator, as execve counts
// arguments and environment), and a command or image once for every
// container that holds a copy of it (a role's command with 100 replicas
// counts 100 times). largest is the setting that costs the most.
func (j *Job) InputSize() (total int, largest InputPart) {
	add := func(path string, n int) {
		total += n
		if n > largest.Bytes {
			largest = InputPart{Path: path, Bytes: n}
		}
	}
	str := func(path, s string, copies int) {
		if s != "" {
			add(path, (len(s)+1)*max(copies, 1))
		}
	}
	// How many containers hold each command and image.
	copies := map[string]int{}
	for _, c := range j.Containers() {
		cmd, img := "", "image"
		for i, r := range j.Roles {
			if r.Name != c.Role {
				continue
			}
			if len(r.Command) > 0 {
				cmd = "roles." + strconv.Itoa(i) + ".command"
			}
			if r.Image != "" {
				img = "roles." + strconv.Itoa(i) + ".image"
			}
		}
		if cmd == "" && c.Role == RoleMain {
			cmd = "command"
		}
		copies[cmd]++
		copies[img]++
	}
	for _, f := range []struct{ path, s string }{
		{"name", j.Name}, {"partition", j.Partition}, {"account", j.Account}, {"reservation", j.Reservation}, {"qos", j.QOS},
		{"workdir", j.Workdir}, {"output", j.Output}, {"error", j.Error},
	} {
		str(f.path, f.s, 1)
	}
	str("image", j.Image, copies["image"])
	for i, a := range j.Command {
		str("command."+strconv.Itoa(i), a, copies["command"])
	}
	for _, k := range sortedKeys(j.Env) {
		add("env."+k, len(k)+len(j.Env[k])+2)
	}
	for i, m := range j.Mounts {
		p := "mounts." + strconv.Itoa(i)
		str(p+".name", m.Name, 1)
		str(p+".source", m.Source, 1)
		str(p+".target", m.Target, 1)
	}
	for i, r := range j.Roles {
		p := "roles." + strconv.Itoa(i)
		str(p+".name", r.Name, 1)
		str(p+".image", r.Image, copies[p+".image"])
		for k, a := range r.Command {
			str(p+".command."+strconv.Itoa(k), a, copies[p+".command"])
		}
	}
	for i, sv := range j.Services {
		str("services."+strconv.Itoa(i)+".name", sv.Name, 1)
	}
	return total, largest
}

// CheckInput refuses a job whose InputSize is above limit bytes (0:
// DefaultMaxInput), pointing at the setting that costs the most.
func (j *Job) CheckInput(limit int) hcl.Diagnostics {
	if limit <= 0 {
		limit = DefaultMaxInput
	}
	total, big := j.InputSize()
	if total <= limit {
		return nil
	}
	return hcl.Diagnostics{errorAt(j.Range(big.Path), "Job too large",
		"the job's text (commands, environment, mounts, paths and names, a command once per container that runs it) takes %s, over schedd's limit (max_job_input) of %s; "+
			"%s alone takes %s: put large data in a file and pass its path.",
		byteSize(total), byteSize(limit), big.Path, byteSize(big.Bytes))}
}

// byteSize writes n bytes for a message: "4194304 bytes (4.0MiB)".
func byteSize(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%d bytes (%.1fMiB)", n, float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d bytes (%.1fKiB)", n, float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
