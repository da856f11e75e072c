// Package completion holds troupe's bash and zsh completion; its test
// drives them against the real binaries and a stub bqueue.
package completion

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
)

// The commands the completion covers that the tests build. bsim, bhosts
// and bjob need nothing beyond what these exercise.
var commands = []string{"bsub", "bqueue", "bkill", "bjob", "badmin", "schedd", "nodelet"}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
	buildOut  []byte
)

func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			buildErr = err
			return
		}
		if binDir, buildErr = os.MkdirTemp("", "troupe-completion-"); buildErr != nil {
			return
		}
		args := []string{"build", "-o", binDir + "/"}
		for _, c := range commands {
			args = append(args, "github.com/troupe-hpc/troupe/cmd/"+c)
		}
		buildOut, buildErr = exec.Command(goTool, args...).CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("building %s: %v\n%s", strings.Join(commands, " "), buildErr, buildOut)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// stubBqueue writes a bqueue that prints jobs as the real one's -o json
// does (cli.WriteJSON of []api.Job) and records its arguments in args.
func stubBqueue(t *testing.T) (dir, argsFile string) {
	t.Helper()
	dir = t.TempDir()
	argsFile = filepath.Join(dir, "args")
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	jobs := []api.Job{
		{ID: 3, Name: "train", User: "alice", Partition: "default", State: api.JobRunning, Submitted: now,
			Containers: []api.Container{{Node: "node1", State: "EXITED"}, {Node: "node2", State: "RUNNING"}}},
		{ID: 5, Name: "done", User: "alice", Partition: "default", State: api.JobCompleted, Submitted: now},
		{ID: 7, Name: "with:colon", User: "bob", Partition: "default", State: api.JobPending, Reason: "Resources", Submitted: now},
		{ID: 12, Name: "held", User: "bob", Partition: "default", State: api.JobHeld, Submitted: now},
	}
	var b bytes.Buffer
	if err := cli.WriteJSON(&b, jobs); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b.Bytes(), []byte("'")) {
		t.Fatal("stub JSON must not contain a single quote")
	}
	script := "#!/bin/sh\necho \"$@\" > '" + argsFile + "'\nprintf '%s' '" + b.String() + "'\n"
	if err := os.WriteFile(filepath.Join(dir, "bqueue"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, argsFile
}

// bashComplete completes line (the cursor at its end) with troupe.bash,
// in dir, with path as PATH, and returns COMPREPLY.
func bashComplete(t *testing.T, bash, dir, path, line string) []string {
	t.Helper()
	script, err := filepath.Abs("troupe.bash")
	if err != nil {
		t.Fatal(err)
	}
	prog := `source "$SCRIPT" || exit 1
read -ra COMP_WORDS <<<"$LINE"
[[ $LINE == *' ' ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE=$LINE
COMP_POINT=${#LINE}
_troupe
printf '%s\n' "${COMPREPLY[@]}"`
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", prog)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + path, "SCRIPT=" + script, "LINE=" + line, "HOME=" + dir, "LC_ALL=C"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("completing %q: %v\n%s", line, err, stderr.String())
	}
	var reply []string
	for w := range strings.FieldsSeq(string(out)) {
		reply = append(reply, w)
	}
	slices.Sort(reply)
	return reply
}

// toolDir holds links to the few programs the completion uses besides
// the troupe commands, so that a PATH of it leaves jq out.
func toolDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, tool := range []string{"awk", "timeout"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("%s is needed: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("SKIPPED LOUDLY: bash is not installed; bash completion is NOT tested")
	}
	bin := binaries(t)
	stub, argsFile := stubBqueue(t)
	tools := toolDir(t)
	work := t.TempDir()
	for _, f := range []string{"a.hcl", "b.json", "notes.txt", "sub/x.hcl"} {
		p := filepath.Join(work, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The real binaries (flags from their -h), the stub bqueue first.
	path := strings.Join([]string{stub, bin, os.Getenv("PATH")}, ":")
	noJQ := strings.Join([]string{stub, bin, tools}, ":")
	// bqueue's own flags come from the real one.
	real := strings.Join([]string{bin, os.Getenv("PATH")}, ":")

	cases := []struct {
		name, line, path string
		want             []string
	}{
		{"bsub long flag", "bsub --w", path, []string{"--wa", "--wait", "--wt"}},
		{"bsub files", "bsub ", path, []string{"a.hcl", "b.json", "sub"}},
		{"bsub more job files", "bsub a.hcl ", path, []string{"a.hcl", "b.json", "sub"}},
		{"bsub no job files after a command", "bsub echo ", path, nil},
		{"bsub after --var value", "bsub --var x=1 a", path, []string{"a.hcl"}},
		{"bqueue -o", "bqueue -o ", real, []string{"json", "table"}},
		{"bqueue -o=", "bqueue -o=j", real, []string{"json"}},
		{"bqueue flags", "bqueue --st", real, []string{"--start"}},
		{"bqueue -u", "bqueue -u roo", real, []string{"root"}},
		{"bkill ids, jq", "bkill ", path, []string{"12", "3", "7"}},
		{"bkill ids, awk", "bkill ", noJQ, []string{"12", "3", "7"}},
		{"bkill skips typed ids", "bkill 3 ", noJQ, []string{"12", "7"}},
		{"bkill prefix", "bkill 1", path, []string{"12"}},
		{"bjob one id", "bjob ", path, []string{"12", "3", "7"}},
		{"bjob no second id", "bjob 3 ", path, nil},
		{"badmin subcommands", "badmin ", path, []string{"drain", "fairshare", "jresume", "jsuspend", "licenses", "partitions", "reconfig", "resume"}},
		{"schedd flags", "schedd --data", path, []string{"--data-dir"}},
		{"schedd runtime", "schedd --runtime ", path, []string{"auto", "process", "runc"}},
		{"nodelet Go-style flag", "nodelet -runtime p", path, []string{"process"}},
		{"nodelet state dir", "nodelet --state-dir su", path, []string{"sub"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := bashComplete(t, bash, work, c.path, c.line)
			want := slices.Clone(c.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%q: got %q, want %q", c.line, got, want)
			}
		})
	}

	t.Run("bkill passes --addr to bqueue", func(t *testing.T) {
		got := bashComplete(t, bash, work, path, "bkill --addr unix:///x.sock ")
		if len(got) != 3 {
			t.Errorf("got %q", got)
		}
		b, err := os.ReadFile(argsFile)
		if err != nil {
			t.Fatal(err)
		}
		if s := strings.TrimSpace(string(b)); s != "-o json --addr unix:///x.sock" {
			t.Errorf("bqueue ran with %q", s)
		}
	})

	// Every flag offered is one the command takes: what "-" completes to
	// equals the flags -h lists.
	for _, c := range commands {
		t.Run(c+" flags match -h", func(t *testing.T) {
			got := bashComplete(t, bash, work, real, c+" -")
			if len(got) == 0 {
				t.Fatalf("%s -<TAB> offers nothing", c)
			}
			out, _ := exec.Command(filepath.Join(bin, c), "-h").CombinedOutput()
			for _, f := range got {
				name := strings.TrimLeft(f, "-")
				if !strings.Contains(string(out), "-"+name+" ") && !strings.Contains(string(out), "-"+name+"\n") &&
					!strings.Contains(string(out), "-"+name+",") && !strings.Contains(string(out), "-"+name+"\t") {
					t.Errorf("%s: offers %s, which -h does not list", c, f)
				}
			}
		})
	}
}

// zsh runs script in a fresh zsh -f with compinit done and _troupe's
// directory in fpath.
func zsh(t *testing.T, zshPath, path, script string) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	prog := `fpath=("$DIR" $fpath)
autoload -Uz compinit && compinit -u -D || exit 1
` + script
	cmd := exec.Command(zshPath, "-f", "-c", prog)
	cmd.Env = []string{"PATH=" + path, "DIR=" + dir, "HOME=" + home, "LC_ALL=C"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("zsh: %v\n%s\nscript:\n%s", err, stderr.String(), script)
	}
	return string(out)
}

func TestZsh(t *testing.T) {
	zshPath, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("SKIPPED LOUDLY: zsh is not installed (apt-get install zsh); zsh completion is NOT tested")
	}
	if out, err := exec.Command(zshPath, "-n", "_troupe").CombinedOutput(); err != nil {
		t.Fatalf("zsh -n _troupe: %v\n%s", err, out)
	}
	bin := binaries(t)
	stub, _ := stubBqueue(t)
	tools := toolDir(t)
	path := strings.Join([]string{stub, bin, os.Getenv("PATH")}, ":")

	t.Run("compinit registers every command", func(t *testing.T) {
		out := zsh(t, zshPath, path, `for c in bsub bqueue bkill bjob bhosts badmin bsim schedd nodelet; do print -r -- "$c=$_comps[$c]"; done`)
		for _, c := range []string{"bsub", "bqueue", "bkill", "bjob", "bhosts", "badmin", "bsim", "schedd", "nodelet"} {
			if !strings.Contains(out, c+"=_troupe\n") {
				t.Errorf("compinit did not register _troupe for %s:\n%s", c, out)
			}
		}
	})

	t.Run("flag specs from -h", func(t *testing.T) {
		real := strings.Join([]string{bin, os.Getenv("PATH")}, ":")
		out := zsh(t, zshPath, real, `source "$DIR/_troupe"
_troupe_specs bsub; print -rl -- $reply
_troupe_specs bqueue; print -rl -- $reply
_troupe_specs badmin; print -rl -- $_troupe_subcmds
_troupe_specs nodelet; print -rl -- $reply`)
		for _, want := range []string{
			"(--wait -K)--wait[wait until the job ends",
			"(--wait -K)-K[",
			"*--var[",
			"-o[output format: table or json]:format:(table json)",
			"-u[show only the jobs of user",
			"partitions:list the partitions in force\\: nodes",
			"--runtime[container runtime: auto, runc, apptainer or process (default \"auto\")]:string:(auto runc apptainer process)",
			"--state-dir[state directory (default \"/var/lib/troupe/nodelet\")]:string:_directories",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("specs lack %q:\n%s", want, out)
			}
		}
	})

	for _, c := range []struct{ name, path string }{{"jq", path}, {"awk", strings.Join([]string{stub, bin, tools}, ":")}} {
		t.Run("job ids with "+c.name, func(t *testing.T) {
			out := zsh(t, zshPath, c.path, `source "$DIR/_troupe"; _troupe_joblist bkill`)
			want := "3:train RUNNING\n7:with\\:colon PENDING\n12:held HELD\n"
			if out != want {
				t.Errorf("got\n%s\nwant\n%s", out, want)
			}
		})
	}
}
