package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestLSID(t *testing.T) {
	t.Setenv("TROUPE_CLUSTER", "hpc1")
	var out, errb bytes.Buffer
	code := run([]string{"--addr", "head7:7070"}, nil, &out, &errb)
	want := "troupe: LSF 10.1.0 compatible commands\n\nMy cluster name is hpc1\nMy master name is head7\n"
	if code != 0 || out.String() != want || errb.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run([]string{"x"}, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unexpected argument "x"`) {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}
