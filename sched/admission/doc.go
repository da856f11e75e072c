// Package admission decides whether schedd takes a submission, and in
// what form: it is the one path POST /v1/jobs, POST /v1/jobs/batch, POST
// /v1/jobs/check (bsub --dry-run) and the web page's submit all go
// through.
//
// Admit takes the submission (api.SubmitRequest: the parsed spec or a job
// file's text, the user, the partition and account asked for, the
// dependency, and, when the job came from a file, the file's name and
// where each setting was written) and a read-only View of the state. It
// answers the resolved Job (partition, account, walltime default,
// containers) or a *Refusal: every problem found, each with the spec's
// path ("walltime", "cluster.size") and, when the job came from a file,
// the file:line:col the setting was written at.
//
// The rules live here once. The scheduling pass asks the same ones of
// queued jobs (PartitionLimits, after a reconfig), and the state's apply
// checks a dependency at commit with CheckDependency. jobspec.Validate
// stays the one check of the spec itself, which the client (bsub) and
// Admit both call.
//
// The package owns the rules, not the data: it reads the state through
// View and imports neither sched nor sched/state (nor does the state
// import it: the state checks at commit that a dependency's jobs exist
// on its own).
package admission
