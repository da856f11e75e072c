package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/troupe-hpc/troupe/internal/api"
)

// Reservations lists the reservations in force (anyone may).
func (c *Client) Reservations(ctx context.Context) (api.ReservationList, error) {
	var r api.ReservationList
	_, err := c.Do(ctx, http.MethodGet, "/v1/reservations", nil, nil, &r)
	return r, err
}

// CreateReservation makes a reservation (administrators only).
func (c *Client) CreateReservation(ctx context.Context, req api.ReservationRequest) (api.Reservation, error) {
	var r api.Reservation
	_, err := c.Do(ctx, http.MethodPost, "/v1/reservations", nil, req, &r)
	return r, err
}

// UpdateReservation changes the fields req.Update names of reservation
// name (administrators only).
func (c *Client) UpdateReservation(ctx context.Context, name string, req api.ReservationRequest) (api.Reservation, error) {
	var r api.Reservation
	_, err := c.Do(ctx, http.MethodPost, "/v1/reservations/"+url.PathEscape(name), nil, req, &r)
	return r, err
}

// DeleteReservation deletes reservation name (administrators only).
func (c *Client) DeleteReservation(ctx context.Context, name string) error {
	_, err := c.Do(ctx, http.MethodPost, "/v1/reservations/"+url.PathEscape(name)+"/delete", nil, struct{}{}, nil)
	return err
}
