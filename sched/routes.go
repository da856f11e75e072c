package sched

import (
	"net/http"

	"github.com/troupe-hpc/troupe/sched/openapi"
	"github.com/troupe-hpc/troupe/sched/state"
)

// route is one endpoint of the /v1 API: a method, a path in
// http.ServeMux's pattern syntax ({id} is a wildcard) and its handler.
type route struct {
	method, path string
	handle       http.HandlerFunc
}

// routes is the /v1 API: the one table Handler serves and the OpenAPI
// document (openapi/openapi.json) describes; TestOpenAPIRoutes checks
// that the two list the same routes.
func (s *Server) routes() []route {
	return []route{
		{"POST", "/v1/jobs", s.handleSubmit},
		{"POST", "/v1/jobs/check", s.handleCheck},
		{"POST", "/v1/jobs/batch", s.handleSubmitBatch},
		{"GET", "/v1/jobs", s.handleJobs},
		{"GET", "/v1/jobs/{id}", s.handleJob},
		{"POST", "/v1/jobs/{id}/kill", s.handleKill},
		{"POST", "/v1/jobs/{id}/hold", s.handleControl(s.control(state.CmdHold, false))},
		{"POST", "/v1/jobs/{id}/release", s.handleControl(s.control(state.CmdRelease, false))},
		{"POST", "/v1/jobs/{id}/attach", s.handleAttach},
		{"POST", "/v1/jobs/{id}/signal", s.handleSignal},
		{"GET", "/v1/history", s.handleHistory},
		{"GET", "/v1/accounting", s.handleAccounting},
		{"GET", "/v1/nodes", s.handleNodes},
		{"POST", "/v1/nodes/register", s.handleRegister},
		{"POST", "/v1/nodes/drain", adminOnly(s.handleDrain)},
		{"POST", "/v1/nodes/{name}/heartbeat", nodeOnly(s.handleHeartbeat)},
		{"GET", "/v1/nodes/{name}/assignments", nodeOnly(s.handleAssignments)},
		{"POST", "/v1/nodes/{name}/status", nodeOnly(s.handleStatus)},
		{"GET", "/v1/nodes/{name}/attach", nodeOnly(s.handleAttachPoll)},
		{"POST", "/v1/nodes/{name}/attach/{req}", nodeOnly(s.handleAttachConnect)},
		{"POST", "/v1/raft/join", adminOnly(s.handleRaftJoin)},
		{"POST", "/v1/tokens", s.handleTokenCreate},
		{"GET", "/v1/tokens", s.handleTokens},
		{"POST", "/v1/tokens/{id}/revoke", s.handleTokenRevoke},
		{"GET", "/v1/partitions", s.handlePartitions},
		{"GET", "/v1/fairshare", s.handleFairShare},
		{"POST", "/v1/reconfig", adminOnly(s.handleReconfig)},
		{"GET", "/v1/snapshot", adminOnly(s.handleSnapshotSave)},
		{"POST", "/v1/snapshot", adminOnly(s.handleSnapshotRestore)},
		{"GET", "/v1/openapi.json", handleOpenAPI},
	}
}

// mux routes the requests of s.routes.
func (s *Server) mux() *http.ServeMux {
	m := http.NewServeMux()
	for _, rt := range s.routes() {
		m.HandleFunc(rt.method+" "+rt.path, rt.handle)
	}
	return m
}

// handleOpenAPI serves GET /v1/openapi.json: the API's OpenAPI 3
// document, as built into this schedd.
func handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openapi.JSON)
}
