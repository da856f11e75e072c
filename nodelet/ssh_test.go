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
// client, keys or listener; with ssh = true it gets the client and keys,
// and troupe-init listens on the SSH port but starts the server only
// when a client connects (`ssh main1 true` works, and a server runs
// after it, not before); a session of two containers has them without
// asking.
func TestAgentSSHOnlyWhenAsked(t *testing.T) {
	needRunc(t)
	s := newTestSchedd(t)
	cfg, _ := startAgent(t, s, RuntimeRunc)
	// What the container sees: the session key, the ssh client, a
	// listener on port 2200 (0x898) and an SSH server among its
	// processes, before and after connecting, and (always) the
	// hostfiles and LSF's host list, which mpirun and LSF scripts use
	// to count slots.
	probe := sh(`test -e /home/work/.ssh/id_cluster && echo keys || echo nokeys
test -e /.troupe/bin/ssh && echo client || echo noclient
sshd() { for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -q 'troupe-ss[h] server' && echo sshd || echo nosshd; }
cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$2 ~ /:0898$/ && $4 == "0A" { n++ } END { print n ? "listening" : "notlistening" }'
sshd
if test -e /.troupe/bin/ssh; then /.troupe/bin/ssh main1 true && echo ssh-ok || echo ssh-failed; sshd; fi
test -s "$TROUPE_HOSTFILE" && test -n "$LSB_HOSTS" && echo hostfile || echo nohostfile`)
	withSSH := "keys\nclient\nlistening\nnosshd\nssh-ok\nsshd\nhostfile"
	for _, c := range []struct {
		name string
		edit func(*jobspec.Job)
		cmds [][]string
		want string
	}{
		{"one container", nil, [][]string{probe}, "nokeys\nnoclient\nnotlistening\nnosshd\nhostfile"},
		{"one container, ssh = true", func(j *jobspec.Job) { j.SSH = true }, [][]string{probe}, withSSH},
		{"two containers", nil, [][]string{probe, nil}, withSSH},
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
