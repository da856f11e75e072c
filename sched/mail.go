package sched

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/backoff"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/sched/state"
)

// Job mail (bsub -B/-N/-u, #SBATCH --mail-type/--mail-user) is the
// leader's: on every state change it looks for jobs whose start or end
// asks for mail that was not taken on yet. For each it first commits
// state.CmdMailed through raft, then runs sendmail; a leader that dies in
// between loses that mail, but no event is ever mailed twice (a new
// leader, or this one after a restart, sees the mark).
//
// sendmail runs as `sendmail -t -i` with the message on stdin: the
// addresses are in its To: header, never in argv, and jobspec checked
// them (MailAddresses); the job's name is a checked name too. When
// schedd runs as root it runs sendmail as the job's user (uid and gid,
// no supplementary groups), so that the mail comes from that user and
// nothing runs as root for a job.

// mailTimeout bounds one sendmail run.
var mailTimeout = 30 * time.Second

// sendmailPaths are where sendmail is looked for when PATH has none.
var sendmailPaths = []string{"/usr/sbin/sendmail", "/usr/lib/sendmail"}

// mailLoop sends the mail jobs ask for until ctx ends (the leader's
// term).
func (s *lifecycle) mailLoop(ctx context.Context) {
	for ctx.Err() == nil {
		v := s.st.Snapshot()
		_, ws := v.Index()
		// Mail is for a start or an end: the queue (a backlog of
		// 100,000 jobs, walked on every change) has none due.
		for _, j := range v.JobsIn(mailStates...) {
			for _, ev := range mailDue(j) {
				s.mailEvent(ctx, j, ev)
			}
		}
		_ = ws.WatchCtx(ctx)
		// Let a burst of changes (a thousand submissions) make one pass.
		_ = backoff.Sleep(ctx, mailPace) // the loop sees ctx's end
	}
}

// mailStates are the states of the jobs mailDue may find mail due for:
// started (j.Started is set from RUNNING on) or ended.
var mailStates = []api.JobState{api.JobRunning, api.JobCompleted, api.JobFailed, api.JobCancelled, api.JobTimeout, api.JobNodeFail, api.JobPreempted}

// mailPace is the least time between two passes of mailLoop.
var mailPace = 50 * time.Millisecond

// mailDue lists the events of j that ask for mail not yet taken on.
func mailDue(j *state.Job) []string {
	m := j.Spec.Mail
	if !m.Wanted() {
		return nil
	}
	var due []string
	if begin := state.MailBegin(j.Requeues); m.Begin && !j.Started.IsZero() && !slices.Contains(j.Mailed, begin) {
		due = append(due, begin)
	}
	if j.State.Terminal() && (m.End || m.Fail && j.State != api.JobCompleted) && !slices.Contains(j.Mailed, state.MailEnd) {
		due = append(due, state.MailEnd)
	}
	return due
}

// mailEvent takes event ev of j on (raft) and, when this call did, sends
// its mail.
func (s *lifecycle) mailEvent(ctx context.Context, j *state.Job, ev string) {
	res, err := s.apply(ctx, state.Command{Act: state.MailSent{Mailed: &state.Mailed{JobID: j.ID, Event: ev}}})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("job mail: could not record it; the next leader's pass will", "job", j.ID, "event", ev, "err", err)
		}
		return
	}
	if mine, _ := res.(bool); !mine {
		return
	}
	if err := sendJobMail(ctx, j, ev); err != nil {
		s.log.Warn("job mail not sent", "job", j.ID, "event", ev, "err", err)
		return
	}
	s.log.Info("job mail sent", "job", j.ID, "event", ev)
}

// errNoSendmail: the node has no sendmail; mail is off.
var errNoSendmail = errors.New("no sendmail on PATH or in /usr/sbin, /usr/lib")

func sendmailBinary() (string, error) {
	if p, err := exec.LookPath("sendmail"); err == nil {
		return p, nil
	}
	for _, p := range sendmailPaths {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errNoSendmail
}

// sendJobMail runs sendmail -t -i with the mail of event ev of j.
func sendJobMail(ctx context.Context, j *state.Job, ev string) error {
	to := j.Spec.Mail.To
	if strings.TrimSpace(to) == "" {
		to = j.User
	}
	addrs, err := jobspec.MailAddresses(to)
	if err != nil {
		return err
	}
	if len(addrs) == 0 {
		return errors.New("no address to mail")
	}
	bin, err := sendmailBinary()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, mailTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-t", "-i")
	cmd.Stdin = bytes.NewReader(jobMail(j, ev, addrs))
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Dir = "/"
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{
			Uid: uint32(j.UID), Gid: uint32(j.GID), Groups: []uint32{}}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s -t -i: %w: %s", bin, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// jobMail is the message of event ev of j, headers and body.
func jobMail(j *state.Job, ev string, to []string) []byte {
	var subject string
	var b strings.Builder
	fmt.Fprintf(&b, "Job %d (%s) of %s, partition %s", j.ID, j.Name, j.User, j.Partition)
	if j.Account != "" {
		fmt.Fprintf(&b, ", account %s", j.Account)
	}
	b.WriteString(".\n\n")
	fmt.Fprintf(&b, "Submitted: %s\n", stamp(j.Submitted))
	if !j.Started.IsZero() {
		fmt.Fprintf(&b, "Started:   %s on %s\n", stamp(j.Started), strings.Join(mailHosts(j), ", "))
	}
	if ev == state.MailEnd {
		subject = fmt.Sprintf("troupe job %d (%s) ended %s", j.ID, j.Name, j.State)
		if j.State == api.JobCompleted || j.State == api.JobFailed {
			subject += fmt.Sprintf(", exit code %d", j.ExitCode)
		}
		fmt.Fprintf(&b, "Ended:     %s, %s", stamp(j.Ended), j.State)
		if j.State == api.JobCompleted || j.State == api.JobFailed {
			fmt.Fprintf(&b, ", exit code %d", j.ExitCode)
		}
		if j.Reason != "" {
			fmt.Fprintf(&b, " (%s)", j.Reason)
		}
		b.WriteString("\n")
		if !j.Started.IsZero() {
			fmt.Fprintf(&b, "Run time:  %s\n", j.Ended.Sub(j.Started).Round(time.Second))
		}
	} else {
		subject = fmt.Sprintf("troupe job %d (%s) began", j.ID, j.Name)
		if j.Requeues > 0 {
			subject += fmt.Sprintf(" (run %d)", j.Requeues+1)
		}
	}
	fmt.Fprintf(&b, "\nbjob %d and bhist -l %d show more.\n", j.ID, j.ID)
	var m bytes.Buffer
	fmt.Fprintf(&m, "To: %s\r\n", strings.Join(to, ", "))
	fmt.Fprintf(&m, "Subject: %s\r\n", headerSafe(subject))
	m.WriteString("Auto-Submitted: auto-generated\r\n")
	m.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n")
	m.WriteString(bodySafe(b.String()))
	return m.Bytes()
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// mailHosts names where each container ran: "node01 (main1)".
func mailHosts(j *state.Job) []string {
	var out []string
	for _, c := range j.Containers {
		if c.Node != "" {
			out = append(out, fmt.Sprintf("%s (%s)", c.Node, c.Host))
		}
	}
	return out
}

// headerSafe keeps a header value on one line of printable text.
func headerSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// bodySafe drops control characters other than newlines and tabs (a
// reason may carry a program's words) and ends lines with CRLF.
func bodySafe(s string) string {
	s = strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f {
			return -1
		}
		return r
	}, s)
	return strings.ReplaceAll(s, "\n", "\r\n")
}
