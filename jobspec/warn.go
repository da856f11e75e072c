package jobspec

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/zclconf/go-cty/cty"
	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/internal/hclattr"
)

// Where a job's warning signal goes (Warning.To).
const (
	WarnMain1 = "main1" // the job's first container only (Slurm's B:, the batch shell)
	WarnAll   = "all"   // every container of the session
)

// Warning is the signal a job asks for before it is stopped: Signal is
// sent Before its walltime ends, and at once when the scheduler chooses
// it to be preempted, so that it can checkpoint. It goes to main1 (To
// WarnMain1, also when empty) or to every container (WarnAll). Slurm's
// --signal=[B:]SIG@SECONDS and LSF's -wa SIG -wt MINUTES ask for one.
type Warning struct {
	// Signal is the signal's name without SIG, upper case ("USR1"), or
	// its number ("10").
	Signal string        `json:"name"`
	Before time.Duration `json:"before"`
	To     string        `json:"to,omitempty"`
}

// ErrWarning marks a warning signal that cannot be used.
var ErrWarning = errors.New("invalid warning signal")

// ParseWarnSignal reads a warning signal's name as kill(1) takes it
// (USR1, SIGUSR1, usr1) or its number, and answers it as Warning.Signal
// keeps it. KILL and STOP are refused: a job cannot catch them, so they
// warn of nothing.
func ParseWarnSignal(s string) (string, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	var sig unix.Signal
	if n, err := strconv.Atoi(t); err == nil {
		if n < 1 || n > 64 {
			return "", fmt.Errorf("%w: signal %s: numbers go from 1 to 64", ErrWarning, s)
		}
		sig = unix.Signal(n)
	} else if sig = unix.SignalNum("SIG" + strings.TrimPrefix(t, "SIG")); sig == 0 || t == "" {
		return "", fmt.Errorf("%w: signal %q is unknown; use a name such as USR1, USR2, TERM, INT, HUP or a number", ErrWarning, s)
	}
	if sig == unix.SIGKILL || sig == unix.SIGSTOP {
		return "", fmt.Errorf("%w: signal %s cannot be caught, so it warns of nothing; use USR1, USR2, TERM or INT", ErrWarning, s)
	}
	if name := unix.SignalName(sig); name != "" {
		return strings.TrimPrefix(name, "SIG"), nil
	}
	return strconv.Itoa(int(sig)), nil
}

// ParseSlurmSignal reads sbatch's --signal=[{R|B}:]SIG[@SECONDS]: SIG a
// name or number, SECONDS how long before the time limit (60 when left
// out, as Slurm). B: sends it to main1 only (Slurm's batch shell);
// without it every container gets it (Slurm signals every job step,
// which in troupe are the session's containers). R: (Slurm's "no
// reservation end") is refused: troupe has no reservation that ends a
// job.
func ParseSlurmSignal(v string) (*Warning, error) {
	w := &Warning{To: WarnAll, Before: 60 * time.Second}
	s := strings.TrimSpace(v)
	if flags, rest, ok := strings.Cut(s, ":"); ok {
		for _, f := range flags {
			switch f {
			case 'B', 'b':
				w.To = WarnMain1
			case 'R', 'r':
				return nil, fmt.Errorf("%w: %q: the R: flag (reservations) is not supported", ErrWarning, v)
			default:
				return nil, fmt.Errorf("%w: %q: unknown flag %q before ':'; want B: or none", ErrWarning, v, f)
			}
		}
		s = rest
	}
	name, secs, hasTime := strings.Cut(s, "@")
	if hasTime {
		n, err := strconv.Atoi(strings.TrimSpace(secs))
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%w: %q: the time after @ is seconds, from 1 to 65535", ErrWarning, v)
		}
		w.Before = time.Duration(n) * time.Second
	}
	sig, err := ParseWarnSignal(name)
	if err != nil {
		return nil, err
	}
	w.Signal = sig
	return w, nil
}

// ParseLSFWarning reads bsub's -wa SIG and -wt [HOURS:]MINUTES: the
// signal goes to every container (LSF's warning action reaches all of
// the job's processes) that long before the job's run limit.
func ParseLSFWarning(action, wait string) (*Warning, error) {
	if strings.TrimSpace(action) == "" || strings.TrimSpace(wait) == "" {
		return nil, fmt.Errorf("%w: -wa and -wt go together: -wa names the signal, -wt how long before the run limit ([hours:]minutes)", ErrWarning)
	}
	sig, err := ParseWarnSignal(action)
	if err != nil {
		return nil, err
	}
	var h, m int
	hs, ms, hasHours := strings.Cut(strings.TrimSpace(wait), ":")
	if !hasHours {
		hs, ms = "0", hs
	}
	h, err1 := strconv.Atoi(hs)
	m, err2 := strconv.Atoi(ms)
	if err1 != nil || err2 != nil || h < 0 || m < 0 || h*60+m == 0 || (hasHours && m > 59) {
		return nil, fmt.Errorf("%w: -wt %q: want [hours:]minutes, more than 0 (LSF counts -wt in minutes)", ErrWarning, wait)
	}
	return &Warning{Signal: sig, Before: time.Duration(h*60+m) * time.Minute, To: WarnAll}, nil
}

// warnSchema is the signal attribute's object.
var warnSchema = map[string]bool{"name": true, "before": true, "to": true}

// signal decodes `signal = { name = "USR1", before = "120s", to = "all" }`.
func (d *decoder) signal(attrs hclattr.Attrs, j *Job) {
	v, a, ok := attrs.Value("signal", cty.DynamicPseudoType)
	if !ok {
		return
	}
	rng := a.Expr.Range()
	fail := func(detail string, args ...any) {
		d.Fail("signal", errorAt(&rng, "Invalid signal", detail, args...))
	}
	if !v.Type().IsObjectType() && !v.Type().IsMapType() {
		fail("signal must be an object such as { name = \"USR1\", before = \"120s\" }, not %s.", v.Type().FriendlyName())
		return
	}
	w := &Warning{}
	for k, e := range v.AsValueMap() {
		if !warnSchema[k] {
			fail("signal has no setting %q; it takes name, before and to.", k)
			return
		}
		if e.IsNull() || !e.IsKnown() || e.Type() != cty.String {
			fail("signal's %s must be a string.", k)
			return
		}
		switch s := e.AsString(); k {
		case "name":
			w.Signal = s
		case "before":
			b, err := ParseWalltime(s)
			if err != nil || b <= 0 {
				fail("signal's before %q is not a positive duration such as \"120s\" or \"2m\".", s)
				return
			}
			w.Before = b
		case "to":
			w.To = s
		}
	}
	if w.Signal == "" || w.Before == 0 {
		fail("signal needs both name (such as \"USR1\") and before (such as \"120s\").")
		return
	}
	if sig, err := ParseWarnSignal(w.Signal); err == nil {
		w.Signal = sig // as kept: USR1
	}
	j.Signal = w
}

// warning checks the job's warning signal: a signal that can be caught,
// a target troupe knows, and a time shorter than the walltime.
func (v *validator) warning() {
	w := v.j.Signal
	if w == nil {
		return
	}
	if _, err := ParseWarnSignal(w.Signal); err != nil {
		v.errorf("signal", "Invalid signal", "%s.", strings.TrimPrefix(err.Error(), ErrWarning.Error()+": "))
		return
	}
	switch {
	case w.To != "" && w.To != WarnMain1 && w.To != WarnAll:
		v.errorf("signal", "Invalid signal", "signal's to is %q; use %q (the default) or %q (every container).", w.To, WarnMain1, WarnAll)
	case w.Before <= 0:
		v.errorf("signal", "Invalid signal", "signal's before is %s; give a positive time such as \"120s\".", w.Before)
	case v.j.Walltime > 0 && w.Before >= v.j.Walltime:
		v.errorf("signal", "Invalid signal", "signal's before (%s) is not shorter than the walltime (%s): the job would be warned as it starts.", w.Before, v.j.Walltime)
	}
}
