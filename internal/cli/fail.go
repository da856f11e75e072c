package cli

import (
	"fmt"
	"io"
	"strings"
)

// Fail prints err as exactly one line, "prog: cause", and returns 1.
// Errors from the client already name schedd's address when it cannot be
// reached ("cannot reach schedd at unix:///…: connect: …"); schedd's
// refusals are its message.
func Fail(stderr io.Writer, prog string, err error) int {
	fmt.Fprintf(stderr, "%s: %s\n", prog, oneLine(err.Error()))
	return ExitFail
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	var parts []string
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}
