package jobspec

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Mail asks for mail about the job: LSF's bsub -B (at the start), -N (at
// the end) and -u (to whom), Slurm's --mail-type and --mail-user. schedd
// sends it through the node's sendmail, once per event.
type Mail struct {
	// To is the addresses, comma-separated; empty: the submitting user
	// (local delivery, as LSF and Slurm do).
	To    string `json:"to,omitempty"`
	Begin bool   `json:"begin,omitempty"` // when the job starts (each run)
	End   bool   `json:"end,omitempty"`   // when it ends, however
	Fail  bool   `json:"fail,omitempty"`  // when it ends other than COMPLETED
}

// Wanted reports whether m asks for any mail.
func (m *Mail) Wanted() bool { return m != nil && (m.Begin || m.End || m.Fail) }

// MaxMailTo bounds Mail.To.
const MaxMailTo = 1024

// mailAddrRe is one address sendmail may be given in a To: header: a
// local user name, or local@domain; no spaces, quotes, angle brackets or
// line breaks, and no leading '-' (never an option).
var mailAddrRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9_.+=%][A-Za-z0-9_.+=%-]*(@[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*)?$`)
})

// MailAddresses splits to into its addresses, or says which one is not
// an address: a local user name or local@domain.
func MailAddresses(to string) ([]string, error) {
	if len(to) > MaxMailTo {
		return nil, fmt.Errorf("mail addresses take %d bytes; at most %d", len(to), MaxMailTo)
	}
	var out []string
	for a := range strings.SplitSeq(to, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if !mailAddrRe().MatchString(a) {
			return nil, fmt.Errorf("mail address %q: want a user name or name@domain", a)
		}
		out = append(out, a)
	}
	return out, nil
}

// ParseMailTypes reads Slurm's --mail-type list (BEGIN, END, FAIL, ALL,
// NONE; case-insensitive) into m. The types troupe has no event for
// (REQUEUE, TIME_LIMIT…, ARRAY_TASKS, INVALID_DEPEND, STAGE_OUT) are
// returned in ignored.
func ParseMailTypes(m *Mail, list string) (ignored []string, err error) {
	for t := range strings.SplitSeq(list, ",") {
		switch u := strings.ToUpper(strings.TrimSpace(t)); u {
		case "BEGIN":
			m.Begin = true
		case "END":
			m.End = true
		case "FAIL":
			m.Fail = true
		case "ALL":
			m.Begin, m.End, m.Fail = true, true, true
		case "NONE":
			m.Begin, m.End, m.Fail = false, false, false
		case "REQUEUE", "INVALID_DEPEND", "STAGE_OUT", "ARRAY_TASKS",
			"TIME_LIMIT", "TIME_LIMIT_50", "TIME_LIMIT_80", "TIME_LIMIT_90":
			ignored = append(ignored, u)
		default:
			return ignored, fmt.Errorf("mail type %q: want BEGIN, END, FAIL, ALL or NONE", t)
		}
	}
	return ignored, nil
}

func (v *validator) mail() {
	if m := v.j.Mail; m != nil {
		if _, err := MailAddresses(m.To); err != nil {
			v.errorf("mail.to", "Invalid mail address", "%v.", err)
		}
	}
}
