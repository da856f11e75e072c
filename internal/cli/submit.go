package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/troupe-hpc/troupe/internal/api"
)

// Verdict is what bsub --dry-run says of a job: schedd's, from submit's
// own admission (POST /v1/jobs/check), or why there is none.
type Verdict struct {
	Checked   bool     `json:"checked"`             // schedd gave a verdict
	BySchedd  bool     `json:"by_schedd,omitempty"` // from submit's admission (always, when checked)
	Partition string   `json:"partition,omitempty"` // the one the job would go to
	OK        bool     `json:"ok"`                  // no problem found
	Problems  []string `json:"problems,omitempty"`  // why schedd would refuse it ("file:line:col: …" when placed)
	Notes     []string `json:"notes,omitempty"`     // what may keep it pending
	Error     string   `json:"error,omitempty"`     // why it was not checked
}

// DryRun is bsub --dry-run=json's output.
type DryRun struct {
	Submit  api.SubmitRequest `json:"submit"`
	Verdict Verdict           `json:"verdict"`
}

// WriteDryRun writes what bsub would submit and the verdict on it;
// hosts are its session's containers ("main1,sub1", as jobspec's
// Job.Hosts expands the job file).
func WriteDryRun(w io.Writer, req api.SubmitRequest, hosts string, v Verdict) error {
	s := req.Spec
	fmt.Fprintf(w, "Job %s from %s (dry run: nothing submitted)\n", cell(s.Name), cell(req.Source))
	kv := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	pair := func(k, val string) { fmt.Fprintf(kv, "  %s:\t%s\n", k, cell(val)) }
	part := s.Partition
	if part == "" {
		part = "(schedd's default)"
	}
	account := s.Account
	if account == "" {
		account = "(the user's default)"
	}
	walltime := "partition default"
	if s.Walltime > 0 {
		walltime = Elapsed(s.Walltime)
	}
	res := fmt.Sprintf("%s cpu, %s GiB memory", Number(s.Resources.CPU, 3), GiB(s.Resources.Memory))
	if s.Resources.GPU > 0 {
		res += fmt.Sprintf(", %s gpu", Number(s.Resources.GPU, 3))
	}
	res += " per container"
	pair("User", fmt.Sprintf("%s (uid %d, gid %d)", cell(req.User), req.UID, req.GID))
	pair("Cwd", req.Cwd)
	pair("Partition", part)
	pair("Account", account)
	pair("Cluster", fmt.Sprintf("%s, %s: %s", plural(s.Cluster.Size, "container"), s.Cluster.Mode, shortHosts(hosts)))
	pair("Resources", res)
	pair("Image", s.Image)
	pair("Command", ShellJoin(s.Command))
	pair("Workdir", s.Workdir)
	pair("Walltime", walltime)
	if s.Priority != 0 {
		pair("Nice", fmt.Sprint(s.Priority))
	}
	pair("Output", s.Output)
	if m := s.Mail; m.Wanted() {
		var on []string
		for _, e := range []struct {
			set  bool
			name string
		}{{m.Begin, "begin"}, {m.End, "end"}, {m.Fail, "fail"}} {
			if e.set {
				on = append(on, e.name)
			}
		}
		to := m.To
		if to == "" {
			to = req.User
		}
		pair("Mail", strings.Join(on, ", ")+" to "+to)
	}
	var env []string
	for k, val := range s.Env {
		env = append(env, k+"="+ShellJoin([]string{val}))
	}
	slices.Sort(env)
	pair("Env", strings.Join(env, " "))
	for _, m := range s.Mounts {
		ro := ""
		if m.ReadOnly {
			ro = " (read-only)"
		}
		pair("Mount "+m.Name, m.Source+" -> "+m.Target+ro)
	}
	if err := kv.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, VerdictLine(v)+"\n")
	for _, p := range v.Problems {
		fmt.Fprintf(w, "  refused: %s\n", oneLine(p))
	}
	for _, n := range v.Notes {
		fmt.Fprintf(w, "  note: %s\n", oneLine(n))
	}
	return err
}

// VerdictLine sums v up in one line.
func VerdictLine(v Verdict) string {
	switch {
	case !v.Checked:
		return "Verdict: not checked (" + oneLine(v.Error) + ")"
	case !v.OK:
		return fmt.Sprintf("Verdict: schedd would refuse it (partition %s)", cell(v.Partition))
	}
	return fmt.Sprintf("Verdict: schedd would take it into partition %s (submit's checks passed; nothing stored)", cell(v.Partition))
}

// shortHosts elides the middle of a long host list.
func shortHosts(hosts string) string {
	h := strings.Split(hosts, ",")
	if len(h) <= 6 {
		return hosts
	}
	return strings.Join(h[:4], ",") + ",…," + h[len(h)-1]
}
