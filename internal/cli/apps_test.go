package cli_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

func TestAppURL(t *testing.T) {
	for _, tt := range []struct{ addr, want string }{
		{"https://schedd.example:7946", "https://schedd.example:7946/apps/12/jupyter/"},
		{"https://a:7946/,https://b:7946", "https://a:7946/apps/12/jupyter/"},
		{"http://127.0.0.1:7946", "http://127.0.0.1:7946/apps/12/jupyter/"},
		{"unix:///run/troupe/schedd.sock", "/apps/12/jupyter/"},
		{"", "/apps/12/jupyter/"},
	} {
		if got := cli.AppURL(tt.addr, 12, "jupyter"); got != tt.want {
			t.Errorf("AppURL(%q) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}

// TestWriteJobServices: bjob lists each service with its URL and port.
func TestWriteJobServices(t *testing.T) {
	j := clitest.Job(12)
	j.Spec.Services = []api.Service{{Name: "jupyter", Port: 8888}, {Name: "board", Port: 6006}}
	var b bytes.Buffer
	if err := cli.WriteJobAt(&b, j, time.Now(), "https://schedd:7946"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Service jupyter:", "https://schedd:7946/apps/12/jupyter/ (port 8888)", "https://schedd:7946/apps/12/board/ (port 6006)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("bjob's view lacks %q:\n%s", want, b.String())
		}
	}
}
