package jobspec

import (
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Cluster modes a job may ask for.
const (
	ModeSingleNode = "single-node"
	ModeMultiNode  = "multi-node"
)

// Role names. main has exactly one container (main1); sub has the rest
// unless role blocks name other roles.
const (
	RoleMain = "main"
	RoleSub  = "sub"
)

// Job is a decoded, validated job file. It is plain data: it travels to
// schedd as JSON and is stored there. Fields left empty in the file keep
// their zero value; schedd fills partition defaults. Parse fills the
// defaults listed in the package documentation (size 1, single-node,
// 1 cpu, 1 GiB, workdir /home/work).
type Job struct {
	Name      string `json:"name"`
	Partition string `json:"partition,omitempty"`
	Account   string `json:"account,omitempty"`
	// QOS is the quality of service asked for ("": the partition's or
	// the account's default); partitions.hcl defines them.
	QOS      string        `json:"qos,omitempty"`
	Walltime time.Duration `json:"walltime,omitempty"` // 0: partition default
	Priority int           `json:"priority,omitempty"` // nice; <= 0 lowers
	// Requeue puts the job back in the queue (PENDING) when a node it runs
	// on fails, instead of ending it NODE_FAIL (Slurm's --requeue).
	Requeue bool `json:"requeue,omitempty"`
	// Reservation names the reservation the job runs in (Slurm's
	// --reservation): only on its nodes, only while its window is open,
	// and only if its user or account is admitted to it.
	Reservation string `json:"reservation,omitempty"`
	// SSH gives a one-container session troupe's SSH server, client and
	// session keys (sessions of more containers always have them).
	SSH       bool              `json:"ssh,omitempty"`
	Cluster   Cluster           `json:"cluster"`
	Resources Resources         `json:"resources"` // per container
	Image     string            `json:"image"`
	Command   []string          `json:"command,omitempty"` // runs in main1
	Workdir   string            `json:"workdir,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Mounts    []Mount           `json:"mounts,omitempty"`
	Output    string            `json:"output,omitempty"` // %j job id, %h host, %u user, %I array index
	// Error is the stderr file pattern (as Output); empty: stderr goes
	// to the output file.
	Error string `json:"error,omitempty"`
	Roles []Role `json:"roles,omitempty"`
	// Services are the ports main1 serves that schedd proxies to the
	// job's owner at /apps/JOB/NAME/ (service blocks).
	Services []Service `json:"services,omitempty"`
	// Array makes the job a job array (array.go); nil: one job.
	Array *Array `json:"array,omitempty"`
	// Mail asks schedd to mail the user when the job starts or ends
	// (nil: no mail).
	Mail *Mail `json:"mail,omitempty"`
	// Signal is the signal the job gets before its walltime ends and
	// when it is chosen to be preempted (nil: none; warn.go).
	Signal *Warning `json:"signal,omitempty"`
	// Licenses are the site-wide licenses the job holds while it runs,
	// by name: licenses = { matlab = 2 } (sbatch -L matlab:2, bsub -R
	// "rusage[matlab=2]"). The job starts only when all are free.
	Licenses map[string]int `json:"licenses,omitempty"`

	// Ranges records where each setting was written, keyed by its JSON
	// path: "cluster.size", "resources.gpu", "env.EPOCHS",
	// "mounts.0.target", "roles.1.replicas"; "" is the job block's
	// header. It is filled by Parse, is not serialized, and may be nil
	// (a Job decoded from JSON). Use Range to look a setting up, so that
	// later checks (partition limits in schedd) can point at the file.
	Ranges map[string]hcl.Range `json:"-"`
}

// Cluster is the shape of the session.
type Cluster struct {
	Size int    `json:"size"` // total containers, main1 included
	Mode string `json:"mode"` // ModeSingleNode | ModeMultiNode
}

// Resources are per container.
type Resources struct {
	CPU    float64 `json:"cpu"`    // cores, may be fractional (0.5)
	Memory int64   `json:"memory"` // bytes
	GPU    float64 `json:"gpu,omitempty"`
}

// Mount is a data folder mounted at the same target in every container.
type Mount struct {
	Name     string `json:"name"`
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readonly,omitempty"`
}

// Role overrides settings for the containers of one role. Zero fields
// inherit the job's: an empty Image or Command, and a nil Resources. A
// non-nil Resources replaces the job's for the role; Parse fills the
// fields the role's resources block leaves out from the job's, and a
// zero CPU or Memory inherits the job's too (GPU 0 means no GPU).
//
// Replicas is the number of containers of the role: always 1 for main;
// for sub, Parse sets it to the number of subs; other roles default to 1.
type Role struct {
	Name      string     `json:"name"`
	Replicas  int        `json:"replicas,omitempty"`
	Command   []string   `json:"command,omitempty"`
	Image     string     `json:"image,omitempty"`
	Resources *Resources `json:"resources,omitempty"`
}

// Protocols a service may speak.
const (
	ProtocolHTTP = "http" // HTTP/1.1, WebSocket upgrades included
)

// Service is a port main1 serves, like the service ports a Backend.AI
// image declares (ai.backend.service-ports): schedd proxies
// /apps/JOB/NAME/ to it, for the job's owner only. Protocol "" reads
// as ProtocolHTTP. The proxy strips /apps/JOB/NAME from the path (the app
// sees "/") and sends it as X-Forwarded-Prefix; KeepPrefix passes the
// whole path, for apps told their base URL (Jupyter's base_url).
type Service struct {
	Name       string `json:"name"`
	Port       int    `json:"port"`
	Protocol   string `json:"protocol,omitempty"`
	KeepPrefix bool   `json:"keep_prefix,omitempty"`
}

// Service returns the job's service name, nil when it has none.
func (j *Job) Service(name string) *Service {
	for i := range j.Services {
		if j.Services[i].Name == name {
			return &j.Services[i]
		}
	}
	return nil
}

// Container is one member of the expanded session, in rank order.
type Container struct {
	Host      string    `json:"host"` // main1, sub1, ...
	Role      string    `json:"role"` // main, sub, ...
	Idx       int       `json:"idx"`  // 1-based within its role
	Rank      int       `json:"rank"` // 0-based in the session
	Image     string    `json:"image"`
	Command   []string  `json:"command,omitempty"` // empty: wait (subs)
	Resources Resources `json:"resources"`
}
