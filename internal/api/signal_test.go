package api

import (
	"syscall"
	"testing"
)

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{
		"USR1": syscall.SIGUSR1, "SIGUSR1": syscall.SIGUSR1, "sigusr1": syscall.SIGUSR1, "usr2": syscall.SIGUSR2,
		"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL,
		"STOP": syscall.SIGSTOP, "CONT": syscall.SIGCONT, "10": syscall.SIGUSR1, "9": syscall.SIGKILL, "64": 64,
	} {
		if got, err := ParseSignal(in); err != nil || got != want {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		"BOGUS": `signal "BOGUS": unknown; use a name such as USR1, HUP, INT, TERM, KILL, STOP, CONT, or a number`,
		"":      `signal "": unknown; use a name such as USR1, HUP, INT, TERM, KILL, STOP, CONT, or a number`,
		"SIG":   `signal "SIG": unknown; use a name such as USR1, HUP, INT, TERM, KILL, STOP, CONT, or a number`,
		"0":     "signal 0: numbers go from 1 to 64",
		"65":    "signal 65: numbers go from 1 to 64",
		"-9":    "signal -9: numbers go from 1 to 64",
	} {
		if _, err := ParseSignal(in); err == nil || err.Error() != msg {
			t.Errorf("ParseSignal(%q): %v, want %q", in, err, msg)
		}
	}
	if SignalName(10) != "USR1" || SignalName(15) != "TERM" {
		t.Errorf("names %q %q", SignalName(10), SignalName(15))
	}
	if !Cancels(syscall.SIGINT) || Cancels(syscall.SIGUSR1) {
		t.Error("Cancels")
	}
}
