package httpapi

import (
	"context"
	"net/http"

	"github.com/troupe-hpc/troupe/internal/api"
)

// Reservations are the site's calendar: nodes set aside for a window.
// Anyone lists them (brsvs, scontrol show reservation); admins make,
// change and delete them (badmin reservation).
type Reservations interface {
	ListReservations(ctx context.Context, w Wait) api.ReservationList
	// CreateReservation makes one; by is the admin who asked.
	CreateReservation(ctx context.Context, req api.ReservationRequest, by string) (api.Reservation, error)
	// UpdateReservation changes the fields req.Update names.
	UpdateReservation(ctx context.Context, name string, req api.ReservationRequest) (api.Reservation, error)
	DeleteReservation(ctx context.Context, name string) error
}

// The reservations' handlers take the API as their first argument, as
// the route table calls them, rather than being its methods: the API
// type keeps to the handlers of the controller's first roles.

func listReservations(a *API, w http.ResponseWriter, r *http.Request) {
	wait, err := parseWait(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	list := a.c.ListReservations(r.Context(), wait)
	writeJSON(w, http.StatusOK, list.Index, list)
}

func createReservation(a *API, w http.ResponseWriter, r *http.Request) {
	var req api.ReservationRequest
	if !decode(w, r, &req) {
		return
	}
	res, err := a.c.CreateReservation(r.Context(), req, by(r.Context()))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, 0, res)
}

func updateReservation(a *API, w http.ResponseWriter, r *http.Request) {
	var req api.ReservationRequest
	if !decode(w, r, &req) {
		return
	}
	res, err := a.c.UpdateReservation(r.Context(), r.PathValue("name"), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, 0, res)
}

func deleteReservation(a *API, w http.ResponseWriter, r *http.Request) {
	if err := a.c.DeleteReservation(r.Context(), r.PathValue("name")); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, 0, struct{}{})
}
