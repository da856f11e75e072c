package jobspec_test

import (
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/jobspec"
)

// TestOutputPath: every escape expands for the container, a relative
// result resolves in the submit directory (cleaned), an unknown escape
// stays as written, and a relative path without a directory is an error
// naming the job.
func TestOutputPath(t *testing.T) {
	tests := []struct {
		name, pattern, cwd, host string
		array                    bool
		want, wantErr            string
	}{
		{"Default", "", "/home/alice/exp", "main1", false, "/home/alice/exp/troupe-42.main1.out", ""},
		{"DefaultArray", "", "/home/alice/exp", "main1", true, "/home/alice/exp/troupe-40_5.main1.out", ""},
		{"AllVerbs", "%u/%j-%h-100%%.log", "/scratch", "sub2", false, "/scratch/alice/42-sub2-100%.log", ""},
		{"ArrayVerbs", "slurm-%A_%a.%I.%j.out", "/w", "main1", true, "/w/slurm-40_5.5.40.out", ""},
		{"LSFJobID", "logs/%J.%j.out", "/w", "main1", false, "/w/logs/42.42.out", ""},
		{"IndexOutsideArray", "out.%I.%a.%A", "/w", "main1", false, "/w/out.0.0.42", ""},
		{"Absolute", "/var/log/%j.out", "", "main1", false, "/var/log/42.out", ""},
		{"UnknownVerbKept", "out-%x-%", "/w", "main1", false, "/w/out-%x-%", ""},
		{"CleansDots", "../logs/./%h.out", "/w/exp", "sub1", false, "/w/logs/sub1.out", ""},
		{"RelativeWithoutCwd", "x.out", "", "main1", false, "", `output "x.out" is relative and job 42 has no absolute cwd`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := jobspec.Job{Output: tc.pattern}
			v := jobspec.OutputVars{JobID: 42, Host: tc.host, User: "alice", Cwd: tc.cwd}
			if tc.array {
				v.ArrayID, v.ArrayIndex = 40, 5
			}
			got, err := j.OutputPath(v)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestErrorPath: no error pattern means stderr joins stdout (""); one
// expands as the output pattern does.
func TestErrorPath(t *testing.T) {
	v := jobspec.OutputVars{JobID: 42, Host: "sub2", User: "alice", Cwd: "/home/alice/exp"}
	if p, err := (&jobspec.Job{}).ErrorPath(v); p != "" || err != nil {
		t.Errorf("no error pattern: %q, %v", p, err)
	}
	j := jobspec.Job{Error: "%u-%j.%h.err"}
	if p, err := j.ErrorPath(v); p != "/home/alice/exp/alice-42.sub2.err" || err != nil {
		t.Errorf("got %q, %v", p, err)
	}
	v.Cwd = ""
	if _, err := j.ErrorPath(v); err == nil || !strings.HasPrefix(err.Error(), `error "alice-42.sub2.err" is relative`) {
		t.Errorf("relative without cwd: %v", err)
	}
}

// TestPatternEscapesAgree: an escape Validate accepts is one the
// expansion replaces, and one it refuses is one the expansion would
// leave as written, so a valid pattern never keeps a stray %.
func TestPatternEscapesAgree(t *testing.T) {
	v := jobspec.OutputVars{JobID: 42, Host: "h", User: "u"}
	for c := byte(0x21); c < 0x7f; c++ {
		pattern := "a%" + string(c)
		j := &jobspec.Job{
			Name: "a", Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
			Resources: jobspec.Resources{CPU: 1, Memory: 1 << 30},
			Image:     "host", Command: []string{"true"}, Output: pattern,
		}
		msg := jobspec.FormatDiagnostics(j.Validate())
		valid := !strings.Contains(msg, "Invalid output pattern")
		if valid && msg != "" {
			t.Fatalf("%q: refused for another reason:\n%s", pattern, msg)
		}
		expanded := jobspec.ExpandPattern(pattern, v) != pattern
		if valid != expanded {
			t.Errorf("%q: Validate accepts it %v, expansion replaces it %v", pattern, valid, expanded)
		}
	}
}
