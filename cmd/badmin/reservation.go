package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/hostlist"
	"github.com/troupe-hpc/troupe/internal/units"
)

// resvFlags are badmin reservation's flags, as given.
type resvFlags struct {
	start, duration, nodes, partition, users, accounts, flags *string
	count                                                     *int
}

func newResvFlags(fs *cli.FlagSet) resvFlags {
	return resvFlags{
		start:     fs.String("start", "", "reservation: when its window opens (`TIME`: 2026-12-01T06:00, now+1hour, 06:00)"),
		duration:  fs.String("duration", "", "reservation: how long each window lasts (`D`: 4:00:00, 4h, 1-00:00:00)"),
		nodes:     fs.String("nodes", "", "reservation: the nodes set aside (`LIST`: node01,node[03-05])"),
		count:     fs.Int("count", 0, "reservation create: set aside `N` nodes, picked now (idle first)"),
		partition: fs.String("partition", "", "reservation create: pick --count nodes in `PARTITION`"),
		users:     fs.String("users", "", "reservation: the `USERS` (comma-separated) whose jobs may run in it"),
		accounts:  fs.String("accounts", "", "reservation: the `ACCOUNTS` (comma-separated) whose jobs may run in it"),
		flags:     fs.String("flags", "", "reservation: `FLAGS`, comma-separated: maint, ignore_jobs, stop_jobs, daily, weekly"),
	}
}

// reservationUsage is badmin reservation's synopsis.
const reservationUsage = "usage: badmin reservation create NAME --start TIME --duration D (--nodes LIST | --count N [--partition P]) [--users U,...] [--accounts A,...] [--flags maint,ignore_jobs,stop_jobs,daily,weekly] | list | show [NAME] | update NAME [--start T] [--duration D] [--nodes L] [--users U] [--accounts A] [--flags F] | delete NAME"

// checkReservationArgs checks the positional arguments of badmin
// reservation; "" when they do.
func checkReservationArgs(pos []string) string {
	if len(pos) < 2 {
		return reservationUsage
	}
	switch pos[1] {
	case "list":
		if len(pos) == 2 {
			return ""
		}
	case "show":
		if len(pos) <= 3 {
			return ""
		}
	case "create", "update", "delete":
		if len(pos) == 3 {
			return ""
		}
	}
	return reservationUsage
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// request is what the flags ask for; set names the flags given.
func (f resvFlags) request(name string, set map[string]bool, now time.Time) (api.ReservationRequest, error) {
	req := api.ReservationRequest{Name: name, Count: *f.count, Partition: *f.partition,
		Users: splitList(*f.users), Accounts: splitList(*f.accounts), Flags: splitList(*f.flags)}
	if set["start"] {
		t, err := units.ParseTime(*f.start, now)
		if err != nil {
			return req, fmt.Errorf("--start: %w", err)
		}
		req.Start = t
	}
	if set["duration"] {
		d, err := units.ParseDuration(*f.duration)
		if err != nil || d <= 0 {
			return req, fmt.Errorf("--duration %q: not a positive duration; %s", *f.duration, units.DurationHelp)
		}
		req.Duration = d
	}
	if set["nodes"] {
		nodes, err := hostlist.Expand(*f.nodes)
		if err != nil {
			return req, fmt.Errorf("--nodes: %w", err)
		}
		req.Nodes = nodes
	}
	for _, k := range []string{"start", "duration", "nodes", "users", "accounts", "flags"} {
		if set[k] {
			req.Update = append(req.Update, k)
		}
	}
	return req, nil
}

// reservation runs badmin reservation SUB [NAME].
func reservation(ctx context.Context, c *client.Client, pos []string, f resvFlags, set map[string]bool, json bool, stdout io.Writer) error {
	sub, name := pos[0], ""
	if len(pos) > 1 {
		name = pos[1]
	}
	switch sub {
	case "create", "update":
		req, err := f.request(name, set, time.Now())
		if err != nil {
			return err
		}
		var r api.Reservation
		if sub == "create" {
			req.Update = nil
			r, err = c.CreateReservation(ctx, req)
		} else {
			if set["count"] || set["partition"] {
				return fmt.Errorf("--count and --partition are for create; update names --nodes")
			}
			r, err = c.UpdateReservation(ctx, name, req)
		}
		if err != nil {
			return err
		}
		if json {
			return cli.WriteJSON(stdout, r)
		}
		verb := "created"
		if sub == "update" {
			verb = "updated"
		}
		_, err = fmt.Fprintf(stdout, "reservation %s %s: %s to %s on %s\n", r.Name, verb,
			r.Start.Local().Format(cli.ResvTime), r.End.Local().Format(cli.ResvTime), strings.Join(r.Nodes, ","))
		return err
	case "delete":
		if err := c.DeleteReservation(ctx, name); err != nil {
			return err
		}
		if json {
			return cli.WriteJSON(stdout, struct{}{})
		}
		_, err := fmt.Fprintf(stdout, "reservation %s deleted\n", name)
		return err
	}
	list, err := c.Reservations(ctx)
	if err != nil {
		return err
	}
	if name != "" {
		var keep []api.Reservation
		for _, r := range list.Reservations {
			if r.Name == name {
				keep = append(keep, r)
			}
		}
		if len(keep) == 0 {
			return fmt.Errorf("reservation %q: no such reservation", name)
		}
		list.Reservations = keep
	}
	switch {
	case json:
		return cli.WriteJSON(stdout, list)
	case sub == "show":
		return cli.WriteReservationsSlurm(stdout, list.Reservations, false)
	}
	t := cli.NewTable(stdout, "NAME", "STATE", "START", "END", "DURATION", "NODES", "USERS", "ACCOUNTS", "FLAGS", "JOBS")
	for _, r := range list.Reservations {
		t.Row(r.Name, r.State, r.Start.Local().Format(cli.ResvTime), r.End.Local().Format(cli.ResvTime), units.FormatDuration(r.Duration),
			hostlist.Compress(r.Nodes), orDash(r.Users), orDash(r.Accounts), orDash(r.Flags), strconv.Itoa(len(r.Jobs)))
	}
	return t.Flush()
}

func orDash(ss []string) string {
	if len(ss) == 0 {
		return "-"
	}
	return strings.Join(ss, ",")
}
