package api

import (
	"strings"
	"testing"
)

func TestParseDependency(t *testing.T) {
	for _, tt := range []struct {
		in, want string // want: the normalized form, or "error: ..." part of the message
	}{
		{"done(12)", "done(12)"},
		{"12", "done(12)"},
		{" done(12) && ended(13) ", "done(12) && ended(13)"},
		{"exit(12)||started(13)", "exit(12) || started(13)"},
		{"DONE(7)", "done(7)"},
		{"afterok:12", "done(12)"},
		{"afterok:12:13,afterany:14", "done(12) && done(13) && ended(14)"},
		{"afternotok:12?after:13", "exit(12) || started(13)"},
		{"", "error: empty"},
		{"done(12) && exit(13) || ended(14)", "error: mixes && and ||"},
		{"afterok:1,afterany:2?after:3", "error: mixes ',' and '?'"},
		{"finished(12)", `error: unknown condition "finished"`},
		{"afterburn:12", `error: unknown type "afterburn"`},
		{"done(x)", `error: job id "x" is not a positive number`},
		{"done(12[5]) && ended(12)", "done(12[5]) && ended(12)"},
		{"afterok:12_5:13", "done(12[5]) && done(13)"},
		{"done(12[x])", `error: want an array element such as 12[5]`},
		{"done(0)", `error: job id "0"`},
		{"done(12", "error: want condition(jobid)"},
		{"afterok", `error: want condition(jobid)`},
		{"afterok:", `error: job id ""`},
		{"afterok:12+5", "error: a delay"},
		{"singleton", "error: want condition(jobid) such as done(12)"},
	} {
		d, err := ParseDependency(tt.in)
		if want, isErr := strings.CutPrefix(tt.want, "error: "); isErr {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("ParseDependency(%q) = %v, %v; want an error with %q", tt.in, d, err, want)
			}
			continue
		}
		if err != nil || d.String() != tt.want {
			t.Errorf("ParseDependency(%q) = %v, %v; want %s", tt.in, d, err, tt.want)
		}
	}
}

func FuzzParseDependency(f *testing.F) {
	for _, s := range []string{"done(12) && ended(13)", "afterok:12:13,afterany:14", "12", "exit(1)||started(2)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDependency(s)
		if err != nil {
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("%q parsed to an invalid %v: %v", s, d, err)
		}
		again, err := ParseDependency(d.String())
		if err != nil || again.String() != d.String() {
			t.Fatalf("%q → %q does not parse back: %v", s, d, err)
		}
	})
}
