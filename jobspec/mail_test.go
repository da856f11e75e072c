package jobspec

import (
	"strings"
	"testing"
)

// TestMailValidate: schedd checks the addresses a job's mail goes to as
// bsub does: what reaches sendmail's To: header is a user name or
// name@domain, never a line break, a second header or an option.
func TestMailValidate(t *testing.T) {
	base := Job{Name: "m", Image: "host", Command: []string{"true"},
		Cluster: Cluster{Size: 1, Mode: ModeSingleNode}, Resources: Resources{CPU: 1, Memory: 1 << 30}}
	for _, c := range []struct {
		to string
		ok bool
	}{
		{"", true}, {"ada", true}, {"ada@example.org, bob", true}, {"first.last+tag@mail.example.org", true},
		{"ada\nBcc: eve@x.org", false}, {"-oQ/tmp", false}, {"ada <a@x>", false}, {"a@-x.org", false},
		{strings.Repeat("a", MaxMailTo+1), false},
	} {
		j := base
		j.Mail = &Mail{To: c.to, End: true}
		diags := j.Validate()
		if diags.HasErrors() == c.ok || !c.ok && !strings.Contains(FormatDiagnostics(diags), "Invalid mail address") {
			t.Errorf("mail to %q: %v, want ok=%v", c.to, FormatDiagnostics(diags), c.ok)
		}
	}
}

// TestMailBlock: a job file asks for mail with a mail block; a bad
// address is reported at its place.
func TestMailBlock(t *testing.T) {
	src := "job \"m\" {\n  image = \"host\"\n  command = [\"true\"]\n  mail {\n    to    = \"ada@example.org\"\n    begin = true\n    fail  = true\n  }\n}\n"
	j, diags := Parse("m.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if j.Mail == nil || *j.Mail != (Mail{To: "ada@example.org", Begin: true, Fail: true}) {
		t.Fatalf("mail %+v", j.Mail)
	}
	_, diags = Parse("m.hcl", []byte(strings.Replace(src, "ada@example.org", "ada <a@x>", 1)))
	if got := FormatDiagnostics(diags); !strings.HasPrefix(got, "m.hcl:5:13: Invalid mail address") {
		t.Errorf("bad address: %q, want it at m.hcl:5:13", got)
	}
	_, diags = Parse("m.hcl", []byte(strings.Replace(src, "begin", "start", 1)))
	if got := FormatDiagnostics(diags); !strings.Contains(got, `An argument named "start" is not expected here.`) {
		t.Errorf("unknown setting: %q", got)
	}
}
