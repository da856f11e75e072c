// Package httpapi is schedd's HTTP layer: every handler of the /v1 API
// and of the jobs' services (/apps/), the route table (routes.go), the
// authentication of TCP callers by bearer token, who may call each
// route (auth.go: a Rule per route, decided by authorize alone), the
// redaction of others' jobs (visible), the follower's redirect to the
// leader, and the mapping of errors to HTTP statuses (Status, the one
// place).
//
// Handlers talk to the controller through Controller (jobs, nodes,
// queue views, admin), which *sched.Server implements; every answer
// that crosses it is a view of internal/api, built by sched (view.go).
// What depends on the data (whether the caller owns the job or the
// token) the controller decides; the caller's identity travels in the
// request's context (internal/auth).
//
// To add a route: a line in routes (method, path, rule, whether the
// read-only listener serves it), its handler here, the Controller
// method it needs (implemented in sched), and its entry in
// sched/openapi/openapi.json (TestOpenAPIRoutes holds the two together).
//
// It must not import sched (the controller imports it), sched/state,
// sched/raftlog or the raft and memdb libraries: errors arrive as the
// kinds of sched/fault (cmd/layout_test.go enforces this).
package httpapi
