package cli

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/hostlist"
)

// ResvTime is how reservations' times print: Slurm's ISO form, local.
const ResvTime = "2006-01-02T15:04:05"

// resvDuration is a reservation's Duration as Slurm prints it:
// [days-]HH:MM:SS, hours always two digits.
func resvDuration(d time.Duration) string {
	s := int64(d / time.Second)
	days, s := s/86400, s%86400
	out := fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
	if days > 0 {
		out = fmt.Sprintf("%d-%s", days, out)
	}
	return out
}

// orNull is Slurm's "(null)" for an empty list.
func orNull(ss []string) string {
	if len(ss) == 0 {
		return "(null)"
	}
	return strings.Join(ss, ",")
}

// resvFlagsSlurm are r's flags as scontrol prints them.
func resvFlagsSlurm(r api.Reservation) string {
	var out []string
	for _, f := range r.Flags {
		out = append(out, strings.ToUpper(f))
	}
	if r.Partition == "" {
		out = append(out, "SPEC_NODES")
	}
	return orNull(out)
}

// WriteReservationsSlurm prints rs as scontrol show reservation does:
// one record of Key=Value lines each, a blank line after each; with one,
// each record on one line.
func WriteReservationsSlurm(w io.Writer, rs []api.Reservation, one bool) error {
	if len(rs) == 0 {
		_, err := fmt.Fprintln(w, "No reservations in the system")
		return err
	}
	for _, r := range rs {
		part := r.Partition
		if part == "" {
			part = "(null)"
		}
		lines := []string{
			fmt.Sprintf("ReservationName=%s StartTime=%s EndTime=%s Duration=%s",
				r.Name, r.Start.Local().Format(ResvTime), r.End.Local().Format(ResvTime), resvDuration(r.Duration)),
			fmt.Sprintf("Nodes=%s NodeCnt=%d CoreCnt=0 Features=(null) PartitionName=%s Flags=%s",
				hostlist.Compress(r.Nodes), len(r.Nodes), part, resvFlagsSlurm(r)),
			"TRES=(null)",
			fmt.Sprintf("Users=%s Groups=(null) Accounts=%s Licenses=(null) State=%s BurstBuffer=(null) Watts=n/a",
				orNull(r.Users), orNull(r.Accounts), r.State),
			"MaxStartDelay=(null)",
		}
		out := strings.Join(lines, "\n   ") + "\n\n"
		if one {
			out = strings.Join(lines, " ") + "\n"
		}
		if _, err := io.WriteString(w, out); err != nil {
			return err
		}
	}
	return nil
}

// WriteSinfoReservations prints rs as sinfo -T (--reservation) does.
func WriteSinfoReservations(w io.Writer, rs []api.Reservation, header bool) error {
	const row = "%-13s %8s %19s %19s %11s  %s\n"
	if header {
		if _, err := fmt.Fprintf(w, row, "RESV_NAME", "STATE", "START_TIME", "END_TIME", "DURATION", "NODELIST"); err != nil {
			return err
		}
	}
	for _, r := range rs {
		if _, err := fmt.Fprintf(w, row, r.Name, r.State, r.Start.Local().Format(ResvTime), r.End.Local().Format(ResvTime),
			resvDuration(r.Duration), hostlist.Compress(r.Nodes)); err != nil {
			return err
		}
	}
	return nil
}

// lsfWindow is r's TIME_WINDOW as LSF's brsvs prints it: a one-time
// window month/day/hour/minute-month/day/hour/minute, a daily one
// hour:minute-hour:minute, a weekly one day:hour:minute-day:hour:minute
// (day 0 is Sunday).
func lsfWindow(r api.Reservation) string {
	s, e := r.Start.Local(), r.End.Local()
	switch {
	case slices.Contains(r.Flags, api.FlagDaily):
		return fmt.Sprintf("%d:%d-%d:%d", s.Hour(), s.Minute(), e.Hour(), e.Minute())
	case slices.Contains(r.Flags, api.FlagWeekly):
		return fmt.Sprintf("%d:%d:%d-%d:%d:%d", s.Weekday(), s.Hour(), s.Minute(), e.Weekday(), e.Hour(), e.Minute())
	}
	return fmt.Sprintf("%d/%d/%d/%d-%d/%d/%d/%d", s.Month(), s.Day(), s.Hour(), s.Minute(), e.Month(), e.Day(), e.Hour(), e.Minute())
}

// WriteBrsvs prints rs as LSF's brsvs does: per reservation its id,
// type (sys for a maintenance reservation, user otherwise), users,
// the slots used of those reserved and the same per host, and its
// time window. nodes give each host's slots (cores); jobs are the
// running jobs, whose containers use the slots.
func WriteBrsvs(w io.Writer, rs []api.Reservation, nodes []api.Node, jobs []api.Job) error {
	if len(rs) == 0 {
		_, err := fmt.Fprintln(w, "No reservation found")
		return err
	}
	slots := map[string]int{}
	for _, n := range nodes {
		slots[n.Name] = int(n.Capacity.CPUMilli / 1000)
	}
	const row = "%-20s %-6s %-16s %-9s %-24s %s\n"
	if _, err := fmt.Fprintf(w, row, "RSVID", "TYPE", "USER", "NCPUS", "RSV_HOSTS", "TIME_WINDOW"); err != nil {
		return err
	}
	for _, r := range rs {
		used := map[string]int{}
		for _, j := range jobs {
			if !slices.Contains(r.Jobs, j.ID) || j.State != api.JobRunning {
				continue
			}
			for _, c := range j.Containers {
				if c.Node != "" {
					used[c.Node] += int(c.Resources.CPU + 0.999)
				}
			}
		}
		typ, user := "user", orDashList(r.Users)
		if slices.Contains(r.Flags, api.FlagMaint) {
			typ, user = "sys", "system"
		}
		total, inUse := 0, 0
		var hosts []string
		for _, n := range r.Nodes {
			total += slots[n]
			inUse += used[n]
			hosts = append(hosts, n+":"+strconv.Itoa(used[n])+"/"+strconv.Itoa(slots[n]))
		}
		first := ""
		if len(hosts) > 0 {
			first = hosts[0]
		}
		if _, err := fmt.Fprintf(w, row, r.Name, typ, user, strconv.Itoa(inUse)+"/"+strconv.Itoa(total), first, lsfWindow(r)); err != nil {
			return err
		}
		for _, h := range hosts[min(1, len(hosts)):] {
			if _, err := fmt.Fprintf(w, row, "", "", "", "", h, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

func orDashList(ss []string) string {
	if len(ss) == 0 {
		return "-"
	}
	return strings.Join(ss, ",")
}

// WriteBrsvsLong prints rs as brsvs -l does: a block per reservation.
func WriteBrsvsLong(w io.Writer, rs []api.Reservation) error {
	if len(rs) == 0 {
		_, err := fmt.Fprintln(w, "No reservation found")
		return err
	}
	for _, r := range rs {
		typ := "user"
		if slices.Contains(r.Flags, api.FlagMaint) {
			typ = "system"
		}
		state := "Inactive"
		if r.State == api.ResvActive {
			state = "Active"
		}
		if _, err := fmt.Fprintf(w, "RSVID                  TYPE        USER         NCPUS    RSV_HOSTS        TIME_WINDOW\n"+
			"%-22s %-11s %-12s %-8d %-16s %s\n"+
			"Reservation Status: %s\nCreator: %s\nUsers: %s\nAccounts: %s\nFlags: %s\nJobs: %d\nStart: %s\nEnd: %s\n\n",
			r.Name, typ, orDashList(r.Users), len(r.Nodes), hostlist.Compress(r.Nodes), lsfWindow(r),
			state, orDashList([]string{r.By}), orDashList(r.Users), orDashList(r.Accounts), orDashList(r.Flags), len(r.Jobs),
			r.Start.Local().Format(time.ANSIC), r.End.Local().Format(time.ANSIC)); err != nil {
			return err
		}
	}
	return nil
}
