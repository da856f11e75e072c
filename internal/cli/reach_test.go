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

// TestWriteJobReach: bjob names the routed address of each container
// that has one and still runs; without any, no line.
func TestWriteJobReach(t *testing.T) {
	j := clitest.Job(12)
	var b bytes.Buffer
	if err := cli.WriteJobAt(&b, j, time.Now(), ""); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "Reachable at") {
		t.Errorf("a job without routed addresses shows one:\n%s", b.String())
	}
	j.Containers[0].Reach, j.Containers[0].State = "10.128.1.2", api.ContainerRunning
	j.Containers[1].Reach, j.Containers[1].State = "10.128.2.2", api.ContainerExited
	b.Reset()
	if err := cli.WriteJobAt(&b, j, time.Now(), ""); err != nil {
		t.Fatal(err)
	}
	want := "Reachable at:"
	if !strings.Contains(b.String(), want) || !strings.Contains(b.String(), j.Containers[0].Host+" 10.128.1.2") || strings.Contains(b.String(), "10.128.2.2") {
		t.Errorf("bjob's view: want %q with %s 10.128.1.2 alone:\n%s", want, j.Containers[0].Host, b.String())
	}
}
