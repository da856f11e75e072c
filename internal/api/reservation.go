package api

import "time"

// Reservations (badmin reservation; LSF brsvs, Slurm scontrol show
// reservation):
//
//	GET  /v1/reservations              → ReservationList (anyone)
//	POST /v1/reservations              ReservationRequest → Reservation (admins; create)
//	POST /v1/reservations/{name}       ReservationRequest → Reservation (admins; update)
//	POST /v1/reservations/{name}/delete {} → {} (admins)

// Reservation flags, as badmin and scontrol spell them.
const (
	FlagMaint      = "maint"       // a maintenance window: its nodes show MAINT while it is open
	FlagIgnoreJobs = "ignore_jobs" // may be made over running jobs that would run into it
	FlagStopJobs   = "stop_jobs"   // stops the jobs still running on its nodes as its window opens
	FlagDaily      = "daily"       // repeats every day
	FlagWeekly     = "weekly"      // repeats every week
)

// Reservation states.
const (
	ResvActive   = "ACTIVE"   // its window is open
	ResvInactive = "INACTIVE" // its window has not opened yet
)

// ReservationRequest makes (POST /v1/reservations) or changes (POST
// /v1/reservations/{name}) a reservation. Times are absolute: the client
// resolves "now+1hour" on its clock. Nodes, or Count nodes that schedd
// picks in Partition when it is made (idle ones first, then by name).
// On an update, only the fields Update names change ("start",
// "duration", "nodes", "users", "accounts", "flags").
type ReservationRequest struct {
	Name      string        `json:"name"`
	Start     time.Time     `json:"start,omitzero"`
	Duration  time.Duration `json:"duration,omitempty"`
	Nodes     []string      `json:"nodes,omitempty"`
	Count     int           `json:"count,omitempty"`
	Partition string        `json:"partition,omitempty"`
	Users     []string      `json:"users,omitempty"`
	Accounts  []string      `json:"accounts,omitempty"`
	Flags     []string      `json:"flags,omitempty"`
	Update    []string      `json:"update,omitempty"`
}

// Reservation is a reservation as listed: Start and End are the window in
// force (the one open, else the next: a recurring one rolls forward).
type Reservation struct {
	Name      string        `json:"name"`
	State     string        `json:"state"` // ResvActive or ResvInactive
	Start     time.Time     `json:"start"`
	End       time.Time     `json:"end"`
	Duration  time.Duration `json:"duration"`
	Nodes     []string      `json:"nodes"`
	Partition string        `json:"partition,omitempty"`
	Users     []string      `json:"users,omitempty"`
	Accounts  []string      `json:"accounts,omitempty"`
	Flags     []string      `json:"flags,omitempty"`
	By        string        `json:"by,omitempty"`
	Created   time.Time     `json:"created"`
	// Jobs are the live jobs that name it, in id order.
	Jobs []uint64 `json:"jobs,omitempty"`
}

// ReservationList lists the reservations in force, by name.
type ReservationList struct {
	Reservations []Reservation `json:"reservations"`
	Index        uint64        `json:"index"`
}
