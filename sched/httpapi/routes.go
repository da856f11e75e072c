package httpapi

import (
	"net/http"

	"github.com/troupe-hpc/troupe/sched/openapi"
)

// Route is one endpoint of the /v1 API: a method, a path in
// http.ServeMux's pattern syntax ({id} is a wildcard), who may call it
// and its handler. Public routes are also served, to Anonymous, on the
// read-only listener (ReadOnly).
type Route struct {
	Method, Path string
	Rule         Rule
	Public       bool
	handle       func(*API, http.ResponseWriter, *http.Request)
}

// routes is the /v1 API: the one table Handler serves and the OpenAPI
// document (sched/openapi/openapi.json) describes; TestOpenAPIRoutes
// checks that the two list the same routes. To add a route: a line
// here (its rule says who may call it), its handler, the controller
// method it needs (Controller), and its entry in openapi.json.
var routes = []Route{
	{"POST", "/v1/jobs", Anyone, false, (*API).submit},
	{"POST", "/v1/jobs/check", Anyone, false, (*API).check},
	{"POST", "/v1/jobs/batch", Anyone, false, (*API).submitBatch},
	{"GET", "/v1/jobs", Anyone, true, (*API).jobs},
	{"GET", "/v1/jobs/{id}", Anyone, true, (*API).job},
	{"POST", "/v1/jobs/{id}/kill", Owner, false, (*API).kill},
	{"POST", "/v1/jobs/{id}/hold", Owner, false, control(Hold)},
	{"POST", "/v1/jobs/{id}/release", Owner, false, control(Release)},
	{"POST", "/v1/jobs/{id}/attach", Owner, false, (*API).attach},
	{"POST", "/v1/jobs/{id}/signal", Owner, false, (*API).signal},
	{"POST", "/v1/jobs/{id}/suspend", AdminOnly, false, control(Suspend)},
	{"POST", "/v1/jobs/{id}/resume", AdminOnly, false, control(Resume)},
	{"GET", "/v1/history", Anyone, false, (*API).history},
	{"GET", "/v1/accounting", Anyone, false, (*API).accounting},
	{"GET", "/v1/nodes", Anyone, true, (*API).nodes},
	{"POST", "/v1/nodes/register", Register, false, (*API).register},
	{"POST", "/v1/nodes/drain", AdminOnly, false, (*API).drain},
	{"POST", "/v1/nodes/{name}/heartbeat", NodeOnly, false, (*API).heartbeat},
	{"GET", "/v1/nodes/{name}/assignments", NodeOnly, false, (*API).assignments},
	{"POST", "/v1/nodes/{name}/status", NodeOnly, false, (*API).status},
	{"GET", "/v1/nodes/{name}/attach", NodeOnly, false, (*API).attachPoll},
	{"POST", "/v1/nodes/{name}/attach/{req}", NodeOnly, false, (*API).attachConnect},
	{"POST", "/v1/raft/join", AdminOnly, false, (*API).raftJoin},
	{"POST", "/v1/tokens", Anyone, false, (*API).tokenCreate},
	{"GET", "/v1/tokens", Anyone, false, (*API).tokens},
	{"POST", "/v1/tokens/{id}/revoke", Anyone, false, (*API).tokenRevoke},
	{"GET", "/v1/partitions", Anyone, true, (*API).partitions},
	{"GET", "/v1/fairshare", Anyone, true, (*API).fairShare},
	{"POST", "/v1/reconfig", AdminOnly, false, (*API).reconfig},
	{"GET", "/v1/snapshot", AdminOnly, false, (*API).snapshotSave},
	{"POST", "/v1/snapshot", AdminOnly, false, (*API).snapshotRestore},
	{"GET", "/v1/reservations", Anyone, true, listReservations},
	{"POST", "/v1/reservations", AdminOnly, false, createReservation},
	{"POST", "/v1/reservations/{name}", AdminOnly, false, updateReservation},
	{"POST", "/v1/reservations/{name}/delete", AdminOnly, false, deleteReservation},
	{"GET", "/v1/openapi.json", Anyone, false, (*API).openAPI},
}

// Routes lists the /v1 API's routes (handlers left out).
func Routes() []Route {
	out := make([]Route, len(routes))
	for i, rt := range routes {
		rt.handle = nil
		out[i] = rt
	}
	return out
}

// Mux routes the requests of the route table, each behind its rule.
func (a *API) Mux() *http.ServeMux {
	m := http.NewServeMux()
	for _, rt := range routes {
		m.HandleFunc(rt.Method+" "+rt.Path, guard(rt.Rule, a.bind(rt.handle)))
	}
	return m
}

func (a *API) bind(h func(*API, http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { h(a, w, r) }
}

// openAPI serves GET /v1/openapi.json: the API's OpenAPI 3 document, as
// built into this schedd.
func (a *API) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openapi.JSON)
}
