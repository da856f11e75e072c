package main

import (
	"strings"
	"testing"
)

func TestShowconfMBD(t *testing.T) {
	t.Setenv("TROUPE_LSF_CONFDIR", "")
	s := schedd(t)
	code, out, errs := runBadmin("--addr", s.Addr, "showconf", "mbd")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || errs != "" || !strings.HasPrefix(lines[0], "MBD configuration at ") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	for _, want := range []string{"    DEFAULT_QUEUE = batch", "    LSF_UNIT_FOR_LIMITS = KB", "    LSF_CONFDIR = /etc/troupe/lsf", "    RESOURCE_RESERVE_PER_TASK = Y"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	for _, args := range [][]string{{"showconf"}, {"showconf", "sbd"}} {
		if code, _, errs := runBadmin(append([]string{"--addr", s.Addr}, args...)...); code != 2 || !strings.Contains(errs, "usage: badmin showconf mbd") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errs)
		}
	}
}
