package jobspec_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/jobspec"
)

// TestCheckInput: a job whose text is above the limit is refused at the
// setting that costs the most, with its file:line:col; a role's command
// counts once per replica; a job within the limit passes.
func TestCheckInput(t *testing.T) {
	big := strings.Repeat("x", 4<<20)
	tests := []struct {
		name  string
		src   string
		limit int
		want  string // "" accepted
	}{
		{"env value", fmt.Sprintf(`job "a" {
  image   = "host"
  command = ["true"]
  env     = { SMALL = "1", BIG = %q }
}`, big), 0, "big.hcl:4:28: Job too large; the job's text (commands, environment, mounts, paths and names, a command once per container that runs it) takes 4194340 bytes (4.0MiB), over schedd's limit (max_job_input) of 65536 bytes (64.0KiB); env.BIG alone takes 4194309 bytes (4.0MiB)"},
		{"argument", fmt.Sprintf(`job "a" {
  image   = "host"
  command = ["echo", %q]
}`, strings.Repeat("y", 70<<10)), 0, "big.hcl:3:22: Job too large"},
		{"role command times replicas", fmt.Sprintf(`job "a" {
  image   = "host"
  command = ["true"]
  role "worker" {
    replicas = 100
    command  = ["echo", %q]
  }
}`, strings.Repeat("z", 1000)), 0, "roles.0.command.1 alone takes 100100 bytes"},
		{"under the limit", `job "a" {
  image   = "host"
  command = ["echo", "hello"]
  env     = { A = "1" }
}`, 0, ""},
		{"a lower limit", `job "a" {
  image   = "host"
  command = ["echo", "hello"]
}`, 16, "over schedd's limit (max_job_input) of 16 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, diags := jobspec.Parse("big.hcl", []byte(tt.src))
			if diags.HasErrors() {
				t.Fatalf("Parse: %s", jobspec.FormatDiagnostics(diags))
			}
			got := strings.TrimSpace(jobspec.FormatDiagnostics(j.CheckInput(tt.limit)))
			switch {
			case tt.want == "" && got != "":
				t.Fatalf("refused: %s", got)
			case tt.want != "" && !strings.Contains(got, tt.want):
				t.Fatalf("got %q\nwant it to hold %q", got, tt.want)
			}
		})
	}
}
