package state

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/troupe-hpc/troupe/internal/units"
)

// Rows before schema 11 embedded the job file and the API's container:
// a job row carried the whole job file under "spec" (its name,
// partition, account, requested walltime, per-container resources and
// roles among the rest) beside the walltime in force, and a container
// its job file's resources in cores ("resources": cpu, memory, gpu)
// beside its millicores (from schema 5). Such rows still load: the
// walltime in force is the row's, else the file's (a row written before
// the row had one); a container's memory and GPU come from its
// "resources" and its millicores, when it has none (before schema 5),
// are its cores rounded as admission rounds them. And while a peer of
// the previous release may read the log (a rolling upgrade: the entries
// and snapshots are written in an older schema, Command.Version and
// Dump.Version), rows are written in that form, so that the older
// schedd reads them as its own.

// rowSchema is the first schema of resolved rows.
const rowSchema = 11

// jobPlain and containerPlain are the rows without their JSON methods.
type (
	jobPlain       Job
	containerPlain Container
)

// v10Resources is a container's resources in a job file's units.
type v10Resources struct {
	CPU    float64 `json:"cpu"`
	Memory int64   `json:"memory"`
	GPU    float64 `json:"gpu,omitempty"`
}

// UnmarshalJSON reads a job row of any schema.
func (j *Job) UnmarshalJSON(b []byte) error {
	var w struct {
		jobPlain
		Spec struct {
			Spec
			Walltime time.Duration `json:"walltime"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*j = Job(w.jobPlain)
	j.Spec = w.Spec.Spec
	if j.Walltime == 0 {
		j.Walltime = w.Spec.Walltime
	}
	if j.InputBytes == 0 {
		j.InputBytes = rowInput(j)
	}
	return nil
}

// UnmarshalJSON reads a container of a job row of any schema.
func (c *Container) UnmarshalJSON(b []byte) error {
	var w struct {
		containerPlain
		Resources *v10Resources `json:"resources"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*c = Container(w.containerPlain)
	if r := w.Resources; r != nil {
		if c.CPUMilli == 0 {
			c.CPUMilli = units.Millicores(r.CPU)
		}
		if c.Memory == 0 {
			c.Memory = r.Memory
		}
		if c.GPU == 0 {
			c.GPU = r.GPU
		}
	}
	return nil
}

// v10Job is a job row as schemas 5 to 10 wrote it.
type v10Job struct {
	jobPlain
	Spec       v10Spec        `json:"spec"`
	Containers []v10Container `json:"containers"`
	InputBytes *int           `json:"input_bytes,omitempty"` // not in the form: never set
}

// v10Spec is the job file as a row of schemas 1 to 10 carried it.
type v10Spec struct {
	Spec
	Name      string        `json:"name"`
	Partition string        `json:"partition,omitempty"`
	Account   string        `json:"account,omitempty"`
	Walltime  time.Duration `json:"walltime,omitempty"`
	Resources v10Resources  `json:"resources"`
}

// v10Container is a container as schemas 5 to 10 wrote it.
type v10Container struct {
	containerPlain
	Memory    *int64       `json:"memory,omitempty"` // in Resources: never set
	GPU       *float64     `json:"gpu,omitempty"`    // in Resources: never set
	Resources v10Resources `json:"resources"`
}

// cores is milli millicores in cores, as a job file writes them.
func cores(milli int64) float64 { return float64(milli) / 1000 }

// legacyJob is j as schemas 5 to 10 wrote it: the job file it carried
// is the row's (the walltime in force as the file's; the job's
// resources main1's, whose role's are the job's when roles differ).
func legacyJob(j *Job) *v10Job {
	out := &v10Job{jobPlain: jobPlain(*j), Spec: v10Spec{Spec: j.Spec, Name: j.Name, Partition: j.Partition, Account: j.Account, Walltime: j.Walltime}}
	out.jobPlain.Containers = nil
	if j.Containers != nil {
		out.Containers = make([]v10Container, len(j.Containers))
	}
	for i := range j.Containers {
		c := &j.Containers[i]
		r := v10Resources{CPU: cores(c.CPUMilli), Memory: c.Memory, GPU: c.GPU}
		out.Containers[i] = v10Container{containerPlain: containerPlain(*c), Resources: r}
		if i == 0 {
			out.Spec.Resources = r
		}
	}
	return out
}

// legacyJobs are js as schemas 5 to 10 wrote them.
func legacyJobs(js []*Job) []*v10Job {
	if js == nil {
		return nil
	}
	out := make([]*v10Job, len(js))
	for i, j := range js {
		out[i] = legacyJob(j)
	}
	return out
}

// MarshalJSON writes d in its schema (Version): rows of a schema before
// 11 in the form that schema read.
func (d Dump) MarshalJSON() ([]byte, error) {
	type plain Dump
	if d.Version >= rowSchema {
		return json.Marshal(plain(d))
	}
	type requestPlain request
	type v10Request struct {
		requestPlain
		Answer *v10Job `json:"answer"`
	}
	var reqs []*v10Request
	for _, r := range d.Requests {
		v := &v10Request{requestPlain: requestPlain(*r)}
		if r.Answer != nil {
			v.Answer = legacyJob(r.Answer)
		}
		reqs = append(reqs, v)
	}
	return json.Marshal(struct {
		plain
		Jobs     []*v10Job     `json:"jobs"`
		Requests []*v10Request `json:"requests,omitempty"`
	}{plain(d), legacyJobs(d.Jobs), reqs})
}

// rowInput is what a row's text costs when admission did not measure it
// (a row written before it did): its names, paths, environment, mounts
// and services once, and each container's image and command.
func rowInput(j *Job) int {
	total := 0
	str := func(s string) {
		if s != "" {
			total += len(s) + 1
		}
	}
	for _, s := range []string{j.Name, j.Partition, j.Account, j.Spec.Workdir, j.Spec.Output, j.Spec.Error} {
		str(s)
	}
	for _, c := range j.Containers {
		str(c.Image)
		for _, a := range c.Command {
			str(a)
		}
	}
	keys := make([]string, 0, len(j.Spec.Env))
	for k := range j.Spec.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		total += len(k) + len(j.Spec.Env[k]) + 2
	}
	for _, m := range j.Spec.Mounts {
		str(m.Name)
		str(m.Source)
		str(m.Target)
	}
	for _, sv := range j.Spec.Services {
		str(sv.Name)
	}
	return total
}

// MarshalJSON writes c in its schema (Version): the jobs of a submit of
// a schema before 11 in the form that schema read.
func (c Command) MarshalJSON() ([]byte, error) {
	type plain Command
	if c.Version >= rowSchema || (c.Submit == nil && c.Batch == nil && c.Submits == nil) {
		return json.Marshal(plain(c))
	}
	var submit *v10Job
	if c.Submit != nil {
		submit = legacyJob(c.Submit)
	}
	return json.Marshal(struct {
		plain
		Submit  *v10Job   `json:"submit,omitempty"`
		Batch   []*v10Job `json:"batch,omitempty"`
		Submits []*v10Job `json:"submits,omitempty"`
	}{plain(c), submit, legacyJobs(c.Batch), legacyJobs(c.Submits)})
}
