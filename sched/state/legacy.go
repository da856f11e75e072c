package state

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/troupe-hpc/troupe/internal/units"
	"github.com/troupe-hpc/troupe/sched/partition"
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
		// The containers without their own JSON method: decoded in
		// this one pass over b, not each again.
		Containers []containerWire `json:"containers"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*j = Job(w.jobPlain)
	j.Spec = w.Spec.Spec
	if w.Containers != nil {
		j.Containers = make([]Container, len(w.Containers))
		for i := range w.Containers {
			j.Containers[i] = w.Containers[i].container()
		}
	}
	if j.Walltime == 0 {
		j.Walltime = w.Spec.Walltime
	}
	if j.InputBytes == 0 {
		j.InputBytes = rowInput(j)
	}
	return nil
}

// containerWire is a container of a job row of any schema as decoded.
type containerWire struct {
	containerPlain
	Resources *v10Resources `json:"resources"`
}

// UnmarshalJSON reads a container of a job row of any schema.
func (c *Container) UnmarshalJSON(b []byte) error {
	var w containerWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*c = w.container()
	return nil
}

// container is w in the current schema's terms.
func (w *containerWire) container() Container {
	c := Container(w.containerPlain)
	if r := w.Resources; r != nil {
		if c.CPUMilli == 0 {
			c.CPUMilli = units.MilliCPU(r.CPU)
		}
		if c.Memory == 0 {
			c.Memory = r.Memory
		}
		if c.GPU == 0 {
			c.GPU = r.GPU
		}
	}
	return c
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

// v10Command is an entry as schemas 1 to 10 wrote it: one struct for
// every kind, the kind's fields set. Kinds it had that are one act now:
// "submit", "submit-batch" and "submits" (Submit), "report" and
// "reports" (Reports).
type v10Command struct {
	Version  int               `json:"v,omitempty"`
	Kind     string            `json:"kind"`
	Time     time.Time         `json:"time"`
	Submit   *Job              `json:"submit,omitempty"`
	Batch    []*Job            `json:"batch,omitempty"`
	Submits  []*Job            `json:"submits,omitempty"`
	Register *Node             `json:"register,omitempty"`
	Plan     *Plan             `json:"plan,omitempty"`
	Report   *Report           `json:"report,omitempty"`
	Kill     uint64            `json:"kill,omitempty"`
	KillDone bool              `json:"kill_done,omitempty"`
	Hold     uint64            `json:"hold,omitempty"`
	Release  uint64            `json:"release,omitempty"`
	Timeout  []uint64          `json:"timeout,omitempty"`
	Config   *partition.Config `json:"config,omitempty"`
	NodeDown *NodeDown         `json:"node_down,omitempty"`
	NodeUp   string            `json:"node_up,omitempty"`
	Token    *Token            `json:"token,omitempty"`
	Revoke   string            `json:"revoke,omitempty"`
	Server   *Server           `json:"server,omitempty"`
	Drain    *Drain            `json:"drain,omitempty"`
	Signal   *Signal           `json:"signal,omitempty"`
	Request  string            `json:"request,omitempty"`
	By       string            `json:"by,omitempty"`
	Purge    []PurgeKey        `json:"purge,omitempty"`
	Index    *int              `json:"index,omitempty"`
	Mailed   *Mailed           `json:"mailed,omitempty"`
	Reports  []Report          `json:"reports,omitempty"`
}

// Kinds of schemas 1 to 10 that are one act now.
const (
	v10Batch   = "submit-batch" // Submit, all or none
	v10Submits = "submits"      // Submit, Each
	v10Report  = "report"       // Reports of one report
)

// command is o as a typed entry.
func (o *v10Command) command() (Command, error) {
	c := Command{Version: o.Version, Time: o.Time}
	req := Request{ID: o.Request, By: o.By}
	switch o.Kind {
	case CmdSubmit:
		c.Act = Submit{Jobs: []*Job{o.Submit}}
	case v10Batch:
		c.Act = Submit{Jobs: o.Batch}
	case v10Submits:
		c.Act = Submit{Jobs: o.Submits, Each: true}
	case CmdRegister:
		c.Act = Register{Node: o.Register}
	case CmdPlan:
		c.Act = Place{Plan: o.Plan}
	case v10Report:
		var rs []Report
		if o.Report != nil {
			rs = []Report{*o.Report}
		}
		c.Act = Reports{Reports: rs}
	case CmdReports:
		c.Act = Reports{Reports: o.Reports}
	case CmdKill:
		c.Act = Kill{Job: JobRef{ID: o.Kill, Index: o.Index}, Done: o.KillDone, Request: req}
	case CmdHold:
		c.Act = Hold{Job: JobRef{ID: o.Hold, Index: o.Index}, Request: req}
	case CmdRelease:
		c.Act = Release{Job: JobRef{ID: o.Release, Index: o.Index}, Request: req}
	case CmdConfig:
		c.Act = Configure{Config: o.Config}
	case CmdCharge:
		c.Act = Charge{}
	case CmdTimeout:
		c.Act = Timeout{Jobs: o.Timeout}
	case CmdNodeDown:
		c.Act = NodesDown{Down: o.NodeDown}
	case CmdNodeUp:
		c.Act = NodeUp{Node: o.NodeUp}
	case CmdToken:
		c.Act = PutToken{Token: o.Token}
	case CmdRevoke:
		c.Act = Revoke{ID: o.Revoke}
	case CmdServer:
		c.Act = PutServer{Server: o.Server}
	case CmdDrain:
		c.Act = DrainNodes{Drain: o.Drain}
	case CmdSignal:
		c.Act = SignalJob{Signal: o.Signal, Request: req}
	case CmdPurge:
		c.Act = Purge{Keys: o.Purge}
	case CmdMailed:
		c.Act = MailSent{Mailed: o.Mailed}
	case CmdTouch:
		c.Act = Touch{}
	case CmdAdoptEnd:
		c.Act = AdoptEnd{}
	default:
		return c, fmt.Errorf("raft entry of schema %d: %w %q", o.Version, ErrUnknownKind, o.Kind)
	}
	return c, nil
}

// toV10 is c as schemas 1 to 10 wrote it, its jobs in their rows' form
// of then. A reservation's act, one of suspension and warnings, or a
// health verdict (schema 11 on) has no such form: the leader never
// proposes it while the cluster's schema is older (NeedsSchema), and
// writing it is refused.
func toV10(c Command) (*v10Command, error) {
	if reservationAct(c.Act) {
		return nil, fmt.Errorf("raft entry %s: %w: it is schema %d's, the entry is of schema %d", c.Act.Kind(), ErrNoOldForm, SchemaReservations, c.Version)
	}
	switch c.Act.(type) {
	case Suspend, Resume, Resumed, Warn:
		return nil, fmt.Errorf("raft entry %s: %w: it is schema %d's, the entry is of schema %d", c.Act.Kind(), ErrNoOldForm, SuspendSchema, c.Version)
	case Health:
		return nil, fmt.Errorf("raft entry %s: %w: it is schema %d's, the entry is of schema %d", c.Act.Kind(), ErrNoOldForm, commandSchema, c.Version)
	}
	o := &v10Command{Version: c.Version, Kind: c.Act.Kind(), Time: c.Time}
	set := func(r Request) { o.Request, o.By = r.ID, r.By }
	switch a := c.Act.(type) {
	case Submit:
		switch {
		case a.Each:
			o.Kind, o.Submits = v10Submits, a.Jobs
		case len(a.Jobs) == 1:
			o.Submit = a.Jobs[0]
		default:
			o.Kind, o.Batch = v10Batch, a.Jobs
		}
	case Register:
		o.Register = a.Node
	case Place:
		o.Plan = a.Plan
	case Reports:
		if len(a.Reports) == 1 {
			o.Kind, o.Report = v10Report, &a.Reports[0]
		} else {
			o.Reports = a.Reports
		}
	case Kill:
		o.Kill, o.Index, o.KillDone = a.Job.ID, a.Job.Index, a.Done
		set(a.Request)
	case Hold:
		o.Hold, o.Index = a.Job.ID, a.Job.Index
		set(a.Request)
	case Release:
		o.Release, o.Index = a.Job.ID, a.Job.Index
		set(a.Request)
	case Configure:
		o.Config = a.Config
	case Timeout:
		o.Timeout = a.Jobs
	case NodesDown:
		o.NodeDown = a.Down
	case NodeUp:
		o.NodeUp = a.Node
	case PutToken:
		o.Token = a.Token
	case Revoke:
		o.Revoke = a.ID
	case PutServer:
		o.Server = a.Server
	case DrainNodes:
		o.Drain = a.Drain
	case SignalJob:
		o.Signal = a.Signal
		set(a.Request)
	case Purge:
		o.Purge = a.Keys
	case MailSent:
		o.Mailed = a.Mailed
	}
	return o, nil
}

// MarshalJSON writes o with its jobs in the rows' form of its schema.
func (o v10Command) MarshalJSON() ([]byte, error) {
	type plain v10Command
	if o.Version >= rowSchema || (o.Submit == nil && o.Batch == nil && o.Submits == nil) {
		return json.Marshal(plain(o))
	}
	var submit *v10Job
	if o.Submit != nil {
		submit = legacyJob(o.Submit)
	}
	return json.Marshal(struct {
		plain
		Submit  *v10Job   `json:"submit,omitempty"`
		Batch   []*v10Job `json:"batch,omitempty"`
		Submits []*v10Job `json:"submits,omitempty"`
	}{plain(o), submit, legacyJobs(o.Batch), legacyJobs(o.Submits)})
}
