package httpapi

import (
	"context"
	"io"
	"iter"
	"net"
	"net/http"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
)

// Controller is what the handlers need of the controller (*sched.Server
// implements it): the four roles below and who leads. Every answer is a
// view (internal/api); no state row, raft or memdb type crosses it.
// Whatever depends on the data (a job's owner, a token's owner, a node
// name in use) the controller decides; the caller's identity comes in
// ctx (internal/auth).
type Controller interface {
	Jobs
	Nodes
	Queue
	Admin
	Reservations
	// Leadership says whether this server serves writes and how far
	// its replica has come (see Leadership).
	Leadership() Leadership
}

// Jobs are the users' operations on jobs.
type Jobs interface {
	Submit(ctx context.Context, req api.SubmitRequest) (api.SubmitResponse, error)
	SubmitBatch(ctx context.Context, reqs []api.SubmitRequest) ([]api.SubmitResponse, error)
	// Check is submit's admission with nothing stored (bsub --dry-run).
	Check(ctx context.Context, req api.SubmitRequest) (api.SubmitCheck, error)
	// ListJobs waits as w says, then answers the state index and the
	// jobs q picks, in id order (the array's elements for q.Array).
	ListJobs(ctx context.Context, w Wait, q JobsQuery) (uint64, iter.Seq[api.Job])
	// Job waits as w says, then answers the job ref names (a whole
	// array or one element) and the state index; the index also with
	// a not-found error, which the answer carries too.
	Job(ctx context.Context, w Wait, ref api.JobRef) (api.Job, uint64, error)
	// Control kills, holds or releases the job ref names; the job's
	// owner or an admin may. It answers the job and the state index
	// once the change is applied, which the answer carries
	// (api.IndexHeader) so that the client's next read waits for it.
	Control(ctx context.Context, op Op, ref api.JobRef) (api.Job, uint64, error)
	// SignalJob sends a signal to the job ref names (owner or admin);
	// the index as Control's.
	SignalJob(ctx context.Context, ref api.JobRef, req api.SignalJob) (api.Job, uint64, error)
	// JobRow is the id of the job row ref names (an element has one
	// once it came up); fault.ErrNotFound if none.
	JobRow(ref api.JobRef) (uint64, error)
	// Attach connects the caller to the terminal of job id's container
	// host (owner or admin; the leader only).
	Attach(ctx context.Context, id uint64, host string) (net.Conn, error)
	// App resolves job id's service for the /apps proxy (owner or
	// admin; the leader only). An upgrade (a WebSocket) is a stream and
	// takes a place among the capped open streams until it ends; a plain
	// request does not.
	App(ctx context.Context, id uint64, service string, upgrade bool) (App, error)
}

// Nodes are the nodelets' operations and the node list.
type Nodes interface {
	ListNodes(ctx context.Context, w Wait) api.NodeList
	// RegisterNode records a nodelet; with credential it also issues
	// the node's own credential (a register by the join token).
	RegisterNode(ctx context.Context, reg api.NodeRegister, credential bool) (api.NodeRegistered, error)
	// NodeHeartbeat notes node alive (from nodelet instance, "" not
	// told) and answers its lease.
	NodeHeartbeat(ctx context.Context, node string, hb api.NodeHeartbeat) (api.NodeLease, error)
	// NodeAssignments notes node alive, waits on the node's own index
	// as w says, and answers what it must run.
	NodeAssignments(ctx context.Context, w Wait, node string) (api.Assignments, error)
	Report(ctx context.Context, node string, rep api.ContainerReport) error
	// AttachRequests are node's pending attach requests, waiting up to
	// wait for one.
	AttachRequests(ctx context.Context, node string, wait time.Duration) []api.AttachRequest
	// AttachConnect claims attach request id of node: deliver hands it
	// the nodelet's connection.
	AttachConnect(node, id string) (deliver func(net.Conn), err error)
	// Drain drains or resumes nodes; by is who asked.
	Drain(ctx context.Context, d api.NodeDrain, by string) ([]api.Node, error)
}

// Queue are the read-only views of the queue's configuration, the fair
// share and the history of ended jobs.
type Queue interface {
	ListPartitions(ctx context.Context, w Wait) api.PartitionList
	ListFairShare(ctx context.Context, w Wait) api.FairShareList
	// JobHistory answers bhist: the state index and the ended jobs q
	// picks, each run once, oldest end first, yielded as they are read
	// (an error, the store's, last); redaction for the caller is the
	// HTTP layer's (visibleHistory).
	JobHistory(ctx context.Context, w Wait, q api.HistoryFilter) (uint64, iter.Seq2[api.HistoryJob, error])
	// AccountingSummary answers bacct: the ended jobs q picks summed
	// per group (user, account or partition).
	AccountingSummary(ctx context.Context, q api.HistoryFilter, group string) (api.Accounting, error)
}

// Admin are the operations on schedd itself and the API's credentials.
type Admin interface {
	Reconfig(ctx context.Context) (api.ReconfigResponse, error)
	JoinPeer(ctx context.Context, req api.RaftJoin) error
	SaveSnapshot(ctx context.Context, w io.Writer) error
	RestoreSnapshot(ctx context.Context, r io.Reader, allowMissingHistory bool) (api.SnapshotRestored, error)
	CreateToken(ctx context.Context, req api.TokenCreate) (api.TokenCreated, error)
	Tokens(ctx context.Context) api.TokenList
	RevokeToken(ctx context.Context, id string) error
	// Identify maps a bearer secret to its identity; fault.ErrUnauthenticated
	// when unknown or revoked.
	Identify(secret string) (auth.Identity, error)
}

// Op is what Control does to a job.
type Op string

// The Ops of Control.
const (
	Kill     Op = "kill"
	KillDone Op = "kill-done" // bkill -d: cancelled, recorded COMPLETED
	Hold     Op = "hold"
	Release  Op = "release"
	// Suspend freezes a running job's containers (admins: badmin
	// suspend, scontrol suspend); Resume asks that a suspended one go on
	// once its CPUs and GPUs are free.
	Suspend Op = "suspend"
	Resume  Op = "resume"
)

// Wait is a blocking query's ?index=N&wait=D: wait until the index
// passes Index (0: answer at once), at most For.
type Wait struct {
	Index uint64
	For   time.Duration
}

// Leadership is where this server stands in its raft cluster.
type Leadership struct {
	// Multi: one of several peers (a lone server serves everything).
	Multi, Leader bool
	// CaughtUp: it has applied its log up to what it had on disk.
	CaughtUp bool
	// LeaderAPI is the leader's API address ("" unknown).
	LeaderAPI string
	// Applied and OnDisk are the replay's progress while not CaughtUp.
	Applied, OnDisk uint64
}

// App is a job's service as the /apps proxy reaches it.
type App struct {
	// Backend is the host name the transport dials for the service.
	Backend string
	// KeepPrefix: the service sees /apps/ID/NAME in its paths.
	KeepPrefix bool
	// Transport carries the requests (its dialer asks the nodelet).
	Transport http.RoundTripper
	// Release, when set, frees an upgraded request's place among the
	// open streams once it has ended.
	Release func()
}

// AppError marks a service the nodelet could not connect (502).
type AppError struct{ Msg string }

func (e *AppError) Error() string { return e.Msg }
