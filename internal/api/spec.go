package api

import (
	"time"

	"github.com/troupe-hpc/troupe/internal/outpattern"
)

// JobSpec is a job's spec as the API carries it: what bsub sends (the
// job file as its tool decoded it, SubmitRequest.Spec) and what a job's
// view shows of it (Job.Spec: the walltime, partition and account in
// force, main1's resources as the job's). Its JSON is the job file's
// (package jobspec, which parses and checks it and converts it to and
// from this form), so the API's clients never link the job file's
// parser.
type JobSpec struct {
	Name      string `json:"name"`
	Partition string `json:"partition,omitempty"`
	Account   string `json:"account,omitempty"`
	// Reservation names the reservation the job runs in (bsub -U,
	// sbatch --reservation); empty: none.
	Reservation string `json:"reservation,omitempty"`
	// QOS is the quality of service asked for; empty: the partition's
	// or the account's default.
	QOS      string        `json:"qos,omitempty"`
	Walltime time.Duration `json:"walltime,omitempty"` // 0: partition default
	Priority int           `json:"priority,omitempty"` // nice; <= 0 lowers
	// Requeue puts the job back in the queue when a node it runs on
	// fails, instead of ending it NODE_FAIL.
	Requeue bool `json:"requeue,omitempty"`
	// SSH gives a one-container session troupe's SSH server, client and
	// session keys.
	SSH       bool              `json:"ssh,omitempty"`
	Cluster   Cluster           `json:"cluster"`
	Resources JobResources      `json:"resources"` // per container
	Image     string            `json:"image"`
	Command   []string          `json:"command,omitempty"` // runs in main1
	Workdir   string            `json:"workdir,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Mounts    []Mount           `json:"mounts,omitempty"`
	Output    string            `json:"output,omitempty"` // %j job id, %h host, %u user, %I array index
	Error     string            `json:"error,omitempty"`  // empty: stderr goes to the output file
	Roles     []Role            `json:"roles,omitempty"`
	Services  []Service         `json:"services,omitempty"`
	Array     *ArraySpec        `json:"array,omitempty"` // nil: one job
	Mail      *Mail             `json:"mail,omitempty"`  // nil: no mail
	// Signal is the warning signal the job asks for before it is
	// stopped (nil: none).
	Signal *Warning `json:"signal,omitempty"`
	// Licenses are the site-wide licenses the job holds while it runs,
	// by name (the job file's licenses = { NAME = N }).
	Licenses map[string]int `json:"licenses,omitempty"`
}

// Cluster is the shape of a session.
type Cluster struct {
	Size int    `json:"size"` // total containers, main1 included
	Mode string `json:"mode"` // single-node | multi-node
}

// JobResources are what a job file asks per container: cores
// (fractional), bytes of memory, GPUs.
type JobResources struct {
	CPU    float64 `json:"cpu"`
	Memory int64   `json:"memory"`
	GPU    float64 `json:"gpu,omitempty"`
}

// Mount is a data folder mounted at the same target in every container.
type Mount struct {
	Name     string `json:"name"`
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readonly,omitempty"`
}

// Role overrides settings for the containers of one role.
type Role struct {
	Name      string        `json:"name"`
	Replicas  int           `json:"replicas,omitempty"`
	Command   []string      `json:"command,omitempty"`
	Image     string        `json:"image,omitempty"`
	Resources *JobResources `json:"resources,omitempty"`
}

// Service is a port main1 serves that schedd proxies to the job's owner
// at /apps/JOB/NAME/.
type Service struct {
	Name       string `json:"name"`
	Port       int    `json:"port"`
	Protocol   string `json:"protocol,omitempty"`
	KeepPrefix bool   `json:"keep_prefix,omitempty"`
}

// ArraySpec makes a job a job array: its index range as written and its
// throttle.
type ArraySpec struct {
	Range      string `json:"range"`
	MaxRunning int    `json:"max_running,omitempty"`
}

// Mail is when to mail whom about a job.
type Mail struct {
	To    string `json:"to,omitempty"`
	Begin bool   `json:"begin,omitempty"`
	End   bool   `json:"end,omitempty"`
	Fail  bool   `json:"fail,omitempty"`
}

// Warning is the signal a job asks for before it is stopped: Signal is
// sent Before its walltime ends, and at once when the scheduler chooses
// it to be preempted. It goes to main1, or with To "all" to every
// container.
type Warning struct {
	// Signal is the signal's name without SIG, upper case ("USR1"), or
	// its number ("10").
	Signal string        `json:"name"`
	Before time.Duration `json:"before"`
	To     string        `json:"to,omitempty"`
}

// Wanted reports whether m asks for any mail.
func (m *Mail) Wanted() bool { return m != nil && (m.Begin || m.End || m.Fail) }

// ContainerSpec is one member of a job's session, in rank order: its
// place and what it runs with, as its job file's resources.
type ContainerSpec struct {
	Host      string       `json:"host"` // main1, sub1, ...
	Role      string       `json:"role"` // main, sub, ...
	Idx       int          `json:"idx"`  // 1-based within its role
	Rank      int          `json:"rank"` // 0-based in the session
	Image     string       `json:"image"`
	Command   []string     `json:"command,omitempty"` // empty: wait (subs)
	Resources JobResources `json:"resources"`
}

// Service returns the job's service name, nil when it has none.
func (s *JobSpec) Service(name string) *Service {
	for i := range s.Services {
		if s.Services[i].Name == name {
			return &s.Services[i]
		}
	}
	return nil
}

// MainCommand is main1's command: role main's, else the job's.
func (s *JobSpec) MainCommand() []string {
	for _, r := range s.Roles {
		if r.Name == "main" && len(r.Command) > 0 {
			return r.Command
		}
	}
	return s.Command
}

// OutputPath expands s's output pattern for v (outpattern.Output).
func (s *JobSpec) OutputPath(v outpattern.Vars) (string, error) {
	return outpattern.Output(s.Output, v)
}

// ErrorPath expands s's error pattern (outpattern.Error); "" when the
// job names none and stderr joins stdout.
func (s *JobSpec) ErrorPath(v outpattern.Vars) (string, error) { return outpattern.Error(s.Error, v) }
