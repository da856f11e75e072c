// Package systemd holds troupe's systemd units; its test checks them with
// systemd-analyze and against the real binaries' flags.
package systemd

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var units = []struct {
	file, binary string
}{
	{"troupe-schedd.service", "schedd"},
	{"troupe-nodelet.service", "nodelet"},
}

const installDir = "/usr/local/bin/"

// unit is a parsed unit file: every value of every key, in order.
type unit map[string][]string

func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unit{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	section := ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: not key=value: %q", path, line)
			}
			k = section + "." + strings.TrimSpace(k)
			u[k] = append(u[k], strings.TrimSpace(v))
		}
	}
	return u
}

func (u unit) one(t *testing.T, key string) string {
	t.Helper()
	v := u[key]
	if len(v) != 1 {
		t.Fatalf("%s: want one value, got %q", key, v)
	}
	return v[0]
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
	buildOut  []byte
)

// binaries builds schedd and nodelet once into a temporary directory
// shared by the tests of this run.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			buildErr = err
			return
		}
		binDir, buildErr = os.MkdirTemp("", "troupe-units-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command(goTool, "build", "-o", binDir+"/",
			"github.com/troupe-hpc/troupe/cmd/schedd", "github.com/troupe-hpc/troupe/cmd/nodelet")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("building schedd and nodelet: %v\n%s", buildErr, buildOut)
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

// TestVerify runs systemd-analyze verify on both units, their ExecStart
// pointing at freshly built binaries (verify insists that they exist) and
// their Documentation= man pages resolved from the repository's man/.
func TestVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("SKIPPED LOUDLY: systemd-analyze is not installed (apt-get install systemd); the units are NOT verified")
	}
	bin := binaries(t)
	dir := t.TempDir()
	var paths []string
	for _, u := range units {
		src, err := os.ReadFile(u.file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(src, []byte("ExecStart="+installDir+u.binary+" ")) {
			t.Fatalf("%s: ExecStart does not run %s%s", u.file, installDir, u.binary)
		}
		src = bytes.ReplaceAll(src, []byte("="+installDir), []byte("="+bin+"/"))
		p := filepath.Join(dir, u.file)
		if err := os.WriteFile(p, src, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	args := []string{"verify", "--generators=no"}
	env := os.Environ()
	if _, err := exec.LookPath("man"); err == nil {
		env = append(env, "MANPATH="+manPath(t))
	} else {
		t.Log("man is not installed: Documentation= is not checked")
		args = append(args, "--man=no")
	}
	cmd := exec.Command(analyze, append(args, paths...)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	// verify also speaks of the host's own units; keep what is about ours.
	var ours []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(line, "troupe") {
			ours = append(ours, line)
		}
	}
	if err != nil || len(ours) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// manPath lays the repository's man pages out as man(1) looks for them.
func manPath(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	pages, _ := filepath.Glob("../../man/*.[1-8]")
	for _, p := range pages {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		sec := filepath.Join(root, "man"+abs[len(abs)-1:])
		if err := os.MkdirAll(sec, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(sec, filepath.Base(abs))); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// helpFlag matches a flag where -h lists it: "  -data-dir string", "  -v\t…",
// "  --wait, -K".
var helpFlag = regexp.MustCompile(`(?m)^  (-[^\t\n]*)`)

// flags returns the flags binary's -h lists, without dashes, and the text.
func flags(t *testing.T, binary string) (map[string]bool, string) {
	t.Helper()
	out, _ := exec.Command(binary, "-h").CombinedOutput() // some exit 2 on -h
	set := map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
		for item := range strings.SplitSeq(m[1], ", ") {
			name, _, _ := strings.Cut(strings.TrimSpace(item), " ")
			set[strings.TrimLeft(name, "-")] = true
		}
	}
	if len(set) == 0 {
		t.Fatalf("%s -h lists no flags:\n%s", binary, out)
	}
	return set, string(out)
}

// TestExecStartFlags checks that every flag ExecStart passes exists, and
// that the directories the units give systemd to manage are the ones the
// daemons use.
func TestExecStartFlags(t *testing.T) {
	bin := binaries(t)
	for _, u := range units {
		t.Run(u.binary, func(t *testing.T) {
			unit := parseUnit(t, u.file)
			argv := strings.Fields(unit.one(t, "Service.ExecStart"))
			known, _ := flags(t, filepath.Join(bin, u.binary))
			values := map[string]string{}
			for i := 1; i < len(argv); i++ {
				arg := argv[i]
				if strings.HasPrefix(arg, "$") {
					continue // the admin's extra flags from EnvironmentFile
				}
				if !strings.HasPrefix(arg, "-") {
					t.Errorf("ExecStart: unexpected argument %q", arg)
					continue
				}
				name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
				if !known[name] {
					t.Errorf("ExecStart: %s -h has no flag %q", u.binary, arg)
				}
				if !hasValue && i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "-") && !strings.HasPrefix(argv[i+1], "$") {
					value = argv[i+1]
					i++
				}
				values[name] = value
			}
			if got := unit["Service.Restart"]; len(got) != 1 || got[0] != "on-failure" {
				t.Errorf("Restart=%q, want on-failure", got)
			}
			state := "/var/lib/" + unit.one(t, "Service.StateDirectory")
			switch u.binary {
			case "schedd":
				if values["data-dir"] != state {
					t.Errorf("--data-dir %q is not the StateDirectory %s", values["data-dir"], state)
				}
			case "nodelet":
				if values["state-dir"] != state {
					t.Errorf("--state-dir %q is not the StateDirectory %s", values["state-dir"], state)
				}
			}
		})
	}
}

// TestDefaults ties the units to the daemons' defaults: schedd's socket
// lies in its RuntimeDirectory, which nodelet's unit must not also
// declare (systemd removes it when either stops); nodelet's state
// directory default is its StateDirectory.
func TestDefaults(t *testing.T) {
	bin := binaries(t)
	schedd := parseUnit(t, "troupe-schedd.service")
	nodelet := parseUnit(t, "troupe-nodelet.service")

	_, help := flags(t, filepath.Join(bin, "schedd"))
	m := regexp.MustCompile(`default (/\S+\.sock)`).FindStringSubmatch(help)
	if m == nil {
		t.Fatalf("schedd -h names no default socket:\n%s", help)
	}
	if want := "/run/" + schedd.one(t, "Service.RuntimeDirectory"); filepath.Dir(m[1]) != want {
		t.Errorf("schedd's default socket %s is not in RuntimeDirectory %s", m[1], want)
	}
	if rd := nodelet["Service.RuntimeDirectory"]; len(rd) > 0 {
		t.Errorf("troupe-nodelet.service declares RuntimeDirectory=%q: stopping nodelet would remove schedd's /run/troupe", rd)
	}

	_, help = flags(t, filepath.Join(bin, "nodelet"))
	m = regexp.MustCompile(`state directory [^\n]*\(default "([^"]+)"\)`).FindStringSubmatch(help)
	if m == nil {
		t.Fatalf("nodelet -h names no default state directory:\n%s", help)
	}
	if want := "/var/lib/" + nodelet.one(t, "Service.StateDirectory"); m[1] != want {
		t.Errorf("nodelet's default --state-dir %s is not StateDirectory %s", m[1], want)
	}

	for key, want := range map[string]string{
		"Service.Delegate":        "yes",
		"Service.KillMode":        "mixed",
		"Service.EnvironmentFile": "-/etc/troupe/nodelet.env",
		"Unit.Wants":              "network-online.target",
	} {
		if got := nodelet[key]; !contains(got, want) {
			t.Errorf("troupe-nodelet.service %s=%q, want %s", key, got, want)
		}
	}
	for key, want := range map[string]string{
		"Service.ProtectSystem":           "strict",
		"Service.ProtectHome":             "yes",
		"Service.PrivateTmp":              "yes",
		"Service.NoNewPrivileges":         "yes",
		"Service.PrivateDevices":          "yes",
		"Service.RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
		"Service.SystemCallFilter":        "@system-service",
	} {
		if got := schedd[key]; !contains(got, want) {
			t.Errorf("troupe-schedd.service %s=%q, want %s", key, got, want)
		}
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestSecurity keeps schedd's sandbox from eroding: systemd-analyze
// security rates it (0 best, 10 worst). nodelet's rating is only logged:
// it is a container supervisor and rates UNSAFE by construction.
func TestSecurity(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("SKIPPED LOUDLY: systemd-analyze is not installed; the sandbox is NOT rated")
	}
	level := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`)
	for _, u := range units {
		out, _ := exec.Command(analyze, "security", "--offline=true", "--no-pager", u.file).CombinedOutput()
		m := level.FindSubmatch(out)
		if m == nil {
			t.Skipf("SKIPPED LOUDLY: this systemd-analyze cannot rate unit files offline (needs systemd ≥ 252):\n%s", out)
		}
		score, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: exposure %.1f", u.file, score)
		if u.binary == "schedd" && score > 3.0 {
			t.Errorf("%s: exposure %.1f, want ≤ 3.0; a sandboxing option was lost:\n%s", u.file, score, out)
		}
	}
}
