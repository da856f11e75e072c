package nodelet

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

// TestAgentSSHOnlyWhenAsked: a one-container session gets no SSH server,
// client or keys; with ssh = true it gets all three, and a session of two
// containers has them without asking.
func TestAgentSSHOnlyWhenAsked(t *testing.T) {
	needRunc(t)
	s := newTestSchedd(t)
	cfg, _ := startAgent(t, s, RuntimeRunc)
	// What the container sees: the session key, the ssh client, an SSH
	// server among its processes, and (always) the hostfiles and LSF's
	// host list, which mpirun and LSF scripts use to count slots.
	probe := sh(`test -e /home/work/.ssh/id_cluster && echo keys || echo nokeys
test -e /.troupe/bin/ssh && echo client || echo noclient
for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -q 'troupe-ss[h] server' && echo sshd || echo nosshd
test -s "$TROUPE_HOSTFILE" && test -n "$LSB_HOSTS" && echo hostfile || echo nohostfile`)
	for _, c := range []struct {
		name string
		edit func(*jobspec.Job)
		cmds [][]string
		want string
	}{
		{"one container", nil, [][]string{probe}, "nokeys\nnoclient\nnosshd\nhostfile"},
		{"one container, ssh = true", func(j *jobspec.Job) { j.SSH = true }, [][]string{probe}, "keys\nclient\nsshd\nhostfile"},
		{"two containers", nil, [][]string{probe, nil}, "keys\nclient\nsshd\nhostfile"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cwd := t.TempDir()
			id := s.submit(t, cwd, c.edit, c.cmds...)
			if u := s.waitState(t, id, "main1", api.ContainerExited); u.ExitCode != 0 {
				t.Fatalf("exit %d", u.ExitCode)
			}
			out := runtimetest.ReadFile(t, filepath.Join(cwd, fmt.Sprintf("troupe-%d.main1.out", id)))
			if out != c.want {
				t.Errorf("container sees %q, want %q", out, c.want)
			}
			s.waitJob(t, id, func(j api.Job) bool { return j.State.Terminal() })
			assertNothingLeft(t, cfg, RuntimeRunc, s.containerIDs(t, id))
		})
	}
}
