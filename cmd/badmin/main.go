// Command badmin is the administrator's tool, as LSF's badmin and Slurm's
// scontrol/sshare are: it shows the partitions in force, re-reads the
// partitions file, and shows fair share.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/units"
)

const prog = "badmin"

var command = cli.Command{
	Name: prog,
	Synopsis: "partitions | reconfig | fairshare | licenses | drain NODE... -r REASON | resume NODE... |\n" +
		"       jsuspend JOBID... | jresume JOBID... |\n" +
		"       snapshot save FILE | snapshot restore [--allow-missing-history] FILE | token create|list|revoke ID | showconf mbd |\n" +
		"       reservation create NAME --start TIME --duration D (--nodes LIST | --count N [--partition P])\n" +
		"         [--users U,...] [--accounts A,...] [--flags maint,ignore_jobs,stop_jobs,daily,weekly] |\n" +
		"       reservation list | show [NAME] | update NAME [--start ...] | delete NAME",
	Summary: "Administer schedd.\n" +
		"  partitions  list the partitions in force: nodes, limits, queued and started jobs\n" +
		"              (the default partition is marked *)\n" +
		"  reconfig    make schedd re-read its partitions file (schedd --partitions) and put\n" +
		"              it in force on every replica; a broken file is refused with\n" +
		"              file:line:col and the running configuration stays\n" +
		"  fairshare   show fair share as sshare does: shares, decayed usage and the factor\n" +
		"  licenses    the site's licenses (partitions.hcl's license blocks): count, held by\n" +
		"              running jobs, free, and how many queued jobs ask for each\n" +
		"  drain       NODE... -r REASON: place nothing new on the nodes; their jobs go on\n" +
		"              (LSF: hclose; Slurm: scontrol update state=drain)\n" +
		"  resume      NODE...: return drained nodes to service (LSF: hopen)\n" +
		"  jsuspend    JOBID...: suspend running jobs: every container of each frozen at once\n" +
		"              (cgroup freezer), its CPUs and GPUs lent to other jobs, its memory held,\n" +
		"              its walltime stopped; bjobs shows SSUSP (Slurm: scontrol suspend)\n" +
		"  jresume     JOBID...: resume suspended jobs: each thaws, memory intact, once its\n" +
		"              CPUs and GPUs are free again (Slurm: scontrol resume)\n" +
		"  snapshot save FILE     write schedd's whole state to FILE: the raft FSM state (a\n" +
		"                         header with its index and sha256) and then every record\n" +
		"                         of the accounting store (bhist's history); - is stdout\n" +
		"  snapshot restore FILE  put FILE's history back in the accounting store and its\n" +
		"                         state in force on every replica; a damaged file, or a\n" +
		"                         store that holds other jobs under its ids or lacks jobs\n" +
		"                         it had handed over, is refused and nothing changes\n" +
		"                         (--allow-missing-history: restore without those jobs)\n" +
		"  token create [--user U] [--admin]  issue a bearer token for schedd over TCP (TLS);\n" +
		"                         the secret is printed once, schedd keeps only its SHA-256\n" +
		"  token list             list tokens (id, user, uid, admin, node, created)\n" +
		"  token revoke ID        revoke a token at once on every replica\n" +
		"  showconf mbd           the LSF parameters troupe's LSF commands behave by, as LSF's\n" +
		"                         badmin showconf mbd prints them (LSF_UNIT_FOR_LIMITS, …)\n" +
		"  reservation create NAME  set nodes aside for a window (--start, --duration) for the\n" +
		"                         jobs that name it (bsub --reservation) of its --users and\n" +
		"                         --accounts; no other job runs there across the window.\n" +
		"                         --count N picks N nodes now (idle first); flags: maint (the\n" +
		"                         nodes show MAINT while it is open), ignore_jobs (made over\n" +
		"                         running jobs that would run into it), stop_jobs (stop the jobs\n" +
		"                         still running on its nodes as the window opens: requeue or\n" +
		"                         cancel), daily, weekly (repeat)\n" +
		"  reservation list|show [NAME]  the reservations in force (show: scontrol's format)\n" +
		"  reservation update NAME  change the fields given (--start, --duration, --nodes,\n" +
		"                         --users, --accounts, --flags)\n" +
		"  reservation delete NAME  delete it; its waiting jobs wait ReservationDeleted",
	Examples: []string{
		"badmin partitions",
		"vi /etc/troupe/partitions.hcl && badmin reconfig",
		"badmin fairshare -o json | jq '.rows[] | select(.user == \"alice\")'",
		"badmin drain node07 node08 -r 'DIMM errors, ticket 4711'",
		"badmin resume node07 node08",
		"badmin jsuspend 42 && badmin jresume 42",
		"badmin snapshot save /backup/troupe-$(date +%F).snap",
		"badmin token create --user alice > /home/alice/.troupe/token",
		"badmin showconf mbd",
		"badmin reservation create pm --start 2026-12-06T06:00 --duration 4h --nodes 'node[01-64]' --flags maint",
		"badmin reservation create course --start 'now+1day' --duration 4:00:00 --count 8 --partition gpu --accounts teach --flags weekly",
	},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	fs.OutputFlag()
	tokUser := fs.String("user", "", "token create: the token's `user` (default: you)")
	tokAdmin := fs.Bool("admin", false, "token create: an administrator's token")
	reason := fs.String("r", "", "drain: why the nodes are drained (shown by bhosts)")
	allowMissing := fs.Bool("allow-missing-history", false, "snapshot restore: restore the state although the accounting store and FILE lack jobs it had handed to the store (their history is lost)")
	fs.Alias("reason", "r")
	rf := newResvFlags(fs)
	pos, err := fs.Parse(args)
	if err != nil {
		return fs.Exit(err)
	}
	if len(pos) == 0 {
		return fs.UsageError("missing subcommand: partitions, reconfig or fairshare")
	}
	sub := pos[0]
	switch {
	case sub == "showconf":
		if len(pos) != 2 || pos[1] != "mbd" {
			return fs.UsageError("usage: badmin showconf mbd")
		}
	case sub == "snapshot":
		if len(pos) != 3 || (pos[1] != "save" && pos[1] != "restore") {
			return fs.UsageError("usage: badmin snapshot save FILE | snapshot restore [--allow-missing-history] FILE")
		}
		if *allowMissing && pos[1] != "restore" {
			return fs.UsageError("--allow-missing-history is for snapshot restore")
		}
	case sub == "token":
		switch {
		case len(pos) == 2 && (pos[1] == "create" || pos[1] == "list"):
		case len(pos) == 3 && pos[1] == "revoke":
		default:
			return fs.UsageError("usage: badmin token create [--user U] [--admin] | list | revoke ID")
		}
	case sub == "drain" || sub == "hclose" || sub == "resume" || sub == "hopen":
		draining := sub == "drain" || sub == "hclose"
		switch {
		case len(pos) < 2 && draining:
			return fs.UsageError("usage: badmin %s NODE... -r REASON", sub)
		case len(pos) < 2:
			return fs.UsageError("usage: badmin %s NODE...", sub)
		case draining && strings.TrimSpace(*reason) == "":
			return fs.UsageError("badmin %s needs a reason: -r REASON", sub)
		case !draining && *reason != "":
			return fs.UsageError("-r is for drain; %s takes no reason", sub)
		}
	case sub == "jsuspend" || sub == "jresume":
		if len(pos) < 2 {
			return fs.UsageError("usage: badmin %s JOBID...", sub)
		}
		if _, err := cli.ParseJobRefs(pos[1:]); err != nil {
			return fs.UsageError("%v", err)
		}
	case sub == "reservation":
		if why := checkReservationArgs(pos); why != "" {
			return fs.UsageError("%s", why)
		}
	case len(pos) > 1:
		return fs.UsageError("unexpected argument %q", pos[1])
	case sub == "partitions", sub == "reconfig", sub == "fairshare":
	case sub == "licenses":
	default:
		return fs.UsageError("unknown subcommand %q: want partitions, reconfig, fairshare, licenses, drain, resume, jsuspend, jresume, snapshot, token, showconf or reservation", sub)
	}
	c, err := fs.Client()
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	json := fs.Format() == cli.FormatJSON
	switch sub {
	case "partitions":
		list, err := c.Partitions(ctx)
		if err == nil {
			if json {
				err = cli.WriteJSON(stdout, list)
			} else {
				err = writePartitions(stdout, list)
			}
		}
		if err != nil {
			return cli.Fail(stderr, prog, err)
		}
	case "reconfig":
		res, err := c.Reconfig(ctx)
		if err != nil {
			return cli.Fail(stderr, prog, err)
		}
		if json {
			err = cli.WriteJSON(stdout, res)
		} else {
			for _, w := range res.Warnings {
				fmt.Fprintf(stderr, "%s: %s\n", prog, w)
			}
			_, err = fmt.Fprintf(stdout, "reconfigured from %s: partitions %s\n", res.Source, strings.Join(res.Partitions, ", "))
		}
		if err != nil {
			return cli.Fail(stderr, prog, err)
		}
	case "drain", "hclose", "resume", "hopen":
		resume := sub == "resume" || sub == "hopen"
		list, err := c.Drain(ctx, api.NodeDrain{Nodes: pos[1:], Reason: *reason, Resume: resume})
		if err == nil {
			if json {
				err = cli.WriteJSON(stdout, list.Nodes)
			} else {
				err = writeDrained(stdout, list.Nodes, resume)
			}
		}
		if err != nil {
			return cli.Fail(stderr, prog, err)
		}
	case "jsuspend", "jresume":
		return suspendJobs(ctx, c, sub, pos[1:], json, stdout, stderr)
	case "token":
		if err := token(ctx, c, pos[1:], *tokUser, *tokAdmin, json, stdout); err != nil {
			return cli.Fail(stderr, prog, err)
		}
	case "snapshot":
		if err := snapshot(ctx, c, pos[1], pos[2], *allowMissing, stdout, stderr); err != nil {
			return cli.Fail(stderr, prog, err)
		}
	case "reservation":
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if err := reservation(ctx, c, pos[1:], rf, set, json, stdout); err != nil {
			return cli.Fail(stderr, prog, err)
		}
	case "showconf":
		list, err := c.Partitions(ctx)
		if err == nil {
			err = cli.WriteShowconfMBD(stdout, list, time.Now())
		}
		if err != nil {
			return cli.Fail(stderr, prog, err)
		}
	case "licenses":
		if err := licenses(ctx, c, json, stdout); err != nil {
			return cli.Fail(stderr, prog, err)
		}
	case "fairshare":
		list, err := c.FairShare(ctx)
		if err == nil {
			if json {
				err = cli.WriteJSON(stdout, list)
			} else {
				err = writeFairShare(stdout, list)
			}
		}
		if err != nil {
			return cli.Fail(stderr, prog, err)
		}
	}
	return cli.ExitOK
}

// suspendJobs suspends (jsuspend) or resumes (jresume) the jobs args
// names, each on its own: the ids that fail are reported and the exit
// status is 1, the others are done.
func suspendJobs(ctx context.Context, c *client.Client, sub string, args []string, json bool, stdout, stderr io.Writer) int {
	refs, _ := cli.ParseJobRefs(args) // checked with the arguments
	action, done := "suspend", "Job <%s> is being suspended\n"
	if sub == "jresume" {
		action, done = "resume", "Job <%s> is being resumed\n"
	}
	code := cli.ExitOK
	var jobs []api.Job
	for _, ref := range refs {
		j, err := c.Control(ctx, ref, action, nil)
		if err != nil {
			fmt.Fprintf(stderr, "%s: job %s: %v\n", prog, ref, err)
			code = 1
			continue
		}
		if json {
			jobs = append(jobs, j)
			continue
		}
		fmt.Fprintf(stdout, done, ref)
	}
	if json {
		if err := cli.WriteJSON(stdout, jobs); err != nil {
			return cli.Fail(stderr, prog, err)
		}
	}
	return code
}

var partitionHeader = []string{"PARTITION", "NODES", "CPUS", "MEMORY(GiB)", "GPUS", "MAX_WALLTIME", "DEFAULT_WALLTIME",
	"MAX_SIZE", "TIER", "PENDING", "RUNNING", "ACCOUNTS", "MODES"}

func writePartitions(w io.Writer, list api.PartitionList) error {
	t := cli.NewTable(w, partitionHeader...)
	for _, p := range list.Partitions {
		name := p.Name
		if p.Default {
			name += "*"
		}
		gpus := "-"
		if p.Capacity.GPU > 0 {
			gpus = cli.Number(p.Capacity.GPU, 2)
		}
		size := "-"
		if p.MaxClusterSize > 0 {
			size = strconv.Itoa(p.MaxClusterSize)
		}
		t.Row(name, strconv.Itoa(len(p.Nodes)), cli.Cores(p.Capacity.CPUMilli), cli.GiB(p.Capacity.Memory), gpus,
			duration(p.MaxWalltime), duration(p.DefaultWalltime),
			size, strconv.Itoa(p.PriorityTier), strconv.Itoa(p.Pending), strconv.Itoa(p.Running),
			orAll(p.AllowedAccounts), orAll(p.AllowedModes))
	}
	return t.Flush()
}

// duration shows a limit, "-" for none.
func duration(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return units.FormatDuration(d)
}

func orAll(ss []string) string {
	if len(ss) == 0 {
		return "all"
	}
	return strings.Join(ss, ",")
}

var fairShareHeader = []string{"Account", "User", "RawShares", "NormShares", "RawUsage", "EffectvUsage", "FairShare"}

// writeFairShare prints sshare's columns; accounts are indented by depth
// as sshare does, users sit under their account.
func writeFairShare(w io.Writer, list api.FairShareList) error {
	t := cli.NewTable(w, fairShareHeader...)
	for _, r := range list.Rows {
		acct := r.Account
		if acct != "" {
			acct = strings.Repeat(" ", r.Depth) + acct
		}
		t.Row(acct, r.User, cli.Number(r.RawShares, 3), strconv.FormatFloat(r.NormShares, 'f', 6, 64),
			strconv.FormatFloat(r.RawUsage, 'f', 0, 64), strconv.FormatFloat(r.EffectvUsage, 'f', 6, 64),
			strconv.FormatFloat(r.FairShare, 'f', 6, 64))
	}
	return t.Flush()
}

// snapshot saves schedd's state to file or restores it from file ("-"
// is stdout for save). A save goes to a temporary file renamed into
// place, so an interrupted save leaves no partial FILE.
func snapshot(ctx context.Context, c *client.Client, op, file string, allowMissing bool, stdout, stderr io.Writer) error {
	if op == "restore" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		res, err := c.RestoreSnapshot(ctx, f, allowMissing)
		if err != nil {
			return fmt.Errorf("restoring %s: %w", file, err)
		}
		hist := " (the file carries no history records: the accounting store was kept as it was)"
		if h := res.History; h != nil {
			hist = fmt.Sprintf(", %d history records (%d put back in the accounting store, %d ended after the snapshot)", h.Records, h.Added, h.After)
		}
		_, err = fmt.Fprintf(stdout, "restored %s: %d jobs, %d nodes%s\n", file, res.Jobs, res.Nodes, hist)
		return err
	}
	if file == "-" {
		return c.SaveSnapshot(ctx, stdout)
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".badmin-snapshot-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := c.SaveSnapshot(ctx, tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s: saved schedd's state and its accounting records to %s\n", prog, file)
	return nil
}

// token runs badmin token create|list|revoke.
func token(ctx context.Context, c *client.Client, args []string, user string, admin, json bool, stdout io.Writer) error {
	switch args[0] {
	case "create":
		t, err := c.CreateToken(ctx, api.TokenCreate{User: user, Admin: admin})
		if err != nil {
			return err
		}
		if json {
			return cli.WriteJSON(stdout, t)
		}
		_, err = fmt.Fprintln(stdout, t.Secret)
		return err
	case "revoke":
		if err := c.RevokeToken(ctx, args[1]); err != nil {
			return err
		}
		_, err := fmt.Fprintf(stdout, "token %s revoked\n", args[1])
		return err
	}
	list, err := c.Tokens(ctx)
	if err != nil {
		return err
	}
	if json {
		return cli.WriteJSON(stdout, list)
	}
	fmt.Fprintf(stdout, "%-16s %-12s %6s %-5s %-12s %s\n", "ID", "USER", "UID", "ADMIN", "NODE", "CREATED")
	for _, t := range list.Tokens {
		admin := "no"
		if t.Admin {
			admin = "yes"
		}
		node := t.Node
		if node == "" {
			node = "-"
		}
		fmt.Fprintf(stdout, "%-16s %-12s %6d %-5s %-12s %s\n", t.ID, t.User, t.UID, admin, node, t.Created.Format(time.RFC3339))
	}
	return nil
}

// writeDrained says what became of each node: "node07: DRAINING (DIMM
// errors)" or "node07: UP".
func writeDrained(w io.Writer, nodes []api.Node, resume bool) error {
	for _, n := range nodes {
		line := fmt.Sprintf("%s: %s", n.Name, n.State)
		switch {
		case !resume && n.State == api.NodeDraining:
			line += fmt.Sprintf(" (%s; its jobs go on, nothing new starts there)", n.Reason)
		case !resume:
			line += fmt.Sprintf(" (%s)", n.Reason)
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}
