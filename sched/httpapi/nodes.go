package httpapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/connlimit"
)

func (a *API) nodes(w http.ResponseWriter, r *http.Request) {
	wait, err := parseWait(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	list := a.c.ListNodes(r.Context(), wait)
	// The api.NodeList is encoded a node at a time: with 10,000 nodes
	// the encoding is never held whole beside the views.
	w.Header().Set("Content-Type", "application/json")
	if list.Index > 0 {
		w.Header().Set(api.IndexHeader, strconv.FormatUint(list.Index, 10))
	}
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	if list.Nodes == nil {
		_, _ = bw.WriteString(`{"nodes":null`)
	} else {
		_, _ = bw.WriteString(`{"nodes":[`)
		for i := range list.Nodes {
			b, err := json.Marshal(&list.Nodes[i])
			if err != nil {
				a.log.Error("encoding a node for GET /v1/nodes", "node", list.Nodes[i].Name, "err", err)
				_ = bw.Flush()
				return
			}
			if i > 0 {
				_ = bw.WriteByte(',')
			}
			_, _ = bw.Write(b)
		}
		_ = bw.WriteByte(']')
	}
	_, _ = fmt.Fprintf(bw, ",\"index\":%d}\n", list.Index)
	_ = bw.Flush()
}

// registerRead bounds reading a registration's body.
const registerRead = 10 * time.Second

// register records a nodelet: the join token, the node's own
// credential or an admin may (Register); a register by the join token
// also answers the node's credential.
func (a *API) register(w http.ResponseWriter, r *http.Request) {
	var reg api.NodeRegister
	// The body names the node, so it is read before the caller is
	// authorized: bounded in time, so that no one holds a connection of
	// the nodes' reserve (ConnGuard) by sending it slowly.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(registerRead))
	if !decode(w, r, &reg) {
		return
	}
	_ = rc.SetReadDeadline(time.Time{})
	if err := authorize(r, Register, reg.Name); err != nil {
		writeErr(w, err)
		return
	}
	id, ok := auth.FromContext(r.Context())
	res, err := a.c.RegisterNode(r.Context(), reg, ok && id.Join)
	if err != nil {
		writeErr(w, err)
		return
	}
	connlimit.MarkNode(r.Context()) // a node's connection (ConnGuard)
	writeJSON(w, http.StatusOK, 0, res)
}

func (a *API) heartbeat(w http.ResponseWriter, r *http.Request) {
	var hb api.NodeHeartbeat
	if r.ContentLength != 0 && !decode(w, r, &hb) {
		return
	}
	// Only the leader answers here (redirectToLeader): the lease comes
	// from the server that counts the node's silence.
	lease, err := a.c.NodeHeartbeat(r.Context(), r.PathValue("name"), hb)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, 0, lease)
}

func (a *API) assignments(w http.ResponseWriter, r *http.Request) {
	wait, err := parseWait(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	res, err := a.c.NodeAssignments(r.Context(), wait, r.PathValue("name"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res.Index, res)
}

func (a *API) status(w http.ResponseWriter, r *http.Request) {
	var rep api.ContainerReport
	if !decode(w, r, &rep) {
		return
	}
	// The node's times on schedd's clock, as the report arrives.
	rep.OnClock(time.Now())
	if err := a.c.Report(r.Context(), r.PathValue("name"), rep); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, 0, struct{}{})
}

func (a *API) drain(w http.ResponseWriter, r *http.Request) {
	var d api.NodeDrain
	if !decode(w, r, &d) {
		return
	}
	nodes, err := a.c.Drain(r.Context(), d, by(r.Context()))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, 0, api.NodeList{Nodes: nodes})
}
