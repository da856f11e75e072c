package state

import (
	"slices"
	"testing"
)

// TestMailedOnce: the first CmdMailed of an event marks it and answers
// true (send it); a repeat, from this leader or the next, answers false,
// and so does one for a job that is gone.
func TestMailedOnce(t *testing.T) {
	h := newHarness(t)
	id := h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}).([]uint64)[0]
	for i, want := range []bool{true, false} {
		if got := h.apply(Command{Act: MailSent{Mailed: &Mailed{JobID: id, Event: MailBegin(0)}}}); got != want {
			t.Errorf("mailed #%d: %v, want %v", i+1, got, want)
		}
	}
	if got := h.apply(Command{Act: MailSent{Mailed: &Mailed{JobID: id, Event: MailEnd}}}); got != true {
		t.Errorf("end after begin: %v, want true", got)
	}
	if got := h.job(id).Mailed; !slices.Equal(got, []string{"begin/0", "end"}) {
		t.Errorf("marks %q", got)
	}
	if got := h.apply(Command{Act: MailSent{Mailed: &Mailed{JobID: 99, Event: MailEnd}}}); got != false {
		t.Errorf("unknown job: %v, want false", got)
	}
	if _, err := h.st.Apply(h.idx+1, Command{Act: MailSent{}}); err == nil {
		t.Error("mailed without an event applied")
	}
}
