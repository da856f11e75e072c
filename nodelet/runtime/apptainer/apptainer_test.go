package apptainer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

// TestMain lets the test binary stand in for apptainer (as Nomad's
// testtask does): run under the name "apptainer" it records its command
// line next to itself and runs the command on the host.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "apptainer" {
		fakeApptainer(os.Args[1:])
	}
	os.Exit(m.Run())
}

// fakeApptainer understands the flags Command writes: binds are applied
// to the command's own path only, the image is ignored (the host's tree
// is the image), APPTAINERENV_ entries become the environment.
func fakeApptainer(args []string) {
	f, err := os.OpenFile(filepath.Join(filepath.Dir(os.Args[0]), "argv.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o666)
	if err == nil {
		_, _ = f.WriteString(strings.Join(args, "\x1f") + "\n")
		f.Close()
	}
	if len(args) == 0 || args[0] != "exec" {
		os.Exit(255)
	}
	withValue := map[string]bool{"--hostname": true, "--home": true, "--pwd": true, "--bind": true}
	binds, pwd, home := map[string]string{}, "", ""
	i := 1
	for ; i < len(args) && strings.HasPrefix(args[i], "--"); i++ {
		if !withValue[args[i]] {
			continue
		}
		v := args[i+1]
		switch args[i] {
		case "--bind":
			p := strings.Split(v, ":")
			binds[p[1]] = p[0]
		case "--pwd":
			pwd = v
		case "--home":
			home = strings.Split(v, ":")[0]
		}
		i++
	}
	cmd := args[i+1:] // args[i] is the image
	if src, ok := binds[cmd[0]]; ok {
		cmd[0] = src
	}
	var env []string
	for _, kv := range os.Environ() {
		if v, ok := strings.CutPrefix(kv, EnvPrefix); ok {
			env = append(env, v)
		}
	}
	if err := os.Chdir(pwd); err != nil {
		_ = os.Chdir(home)
	}
	err = syscall.Exec(cmd[0], cmd, env)
	os.Stderr.WriteString("fake apptainer: " + err.Error() + "\n")
	os.Exit(255)
}

// fakeBinary links the test binary as dir/apptainer.
func fakeBinary(t *testing.T) (bin, log string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o777)
	bin = filepath.Join(dir, "apptainer")
	if err := os.Symlink(exe, bin); err != nil {
		t.Fatal(err)
	}
	return bin, filepath.Join(dir, "argv.log")
}

func TestSuite(t *testing.T) {
	bin, _ := fakeBinary(t)
	r, err := New(bin)
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.RunWith(t, r, runtimetest.Options{
		NoUnprivileged: "the stand-in apptainer is this test binary, which uid 65534 cannot run",
		NoCPUs:         "the apptainer driver does not apply cgroup limits (cpusets included)"})
}

// TestCommandLine checks what a real apptainer would be asked to do.
func TestCommandLine(t *testing.T) {
	bin, log := fakeBinary(t)
	r, err := New(bin)
	if err != nil {
		t.Fatal(err)
	}
	init := runtimetest.BuildInit(t)
	sifPath := filepath.Join(t.TempDir(), "img.sif")
	if err := os.WriteFile(sifPath, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	spec, _ := runtimetest.NewSpec(t, init, "true")
	spec.Image = sifPath
	spec.Hostname = "sub2"
	spec.Workdir = "/home/work/data"
	spec.Mounts = []runtime.Mount{{Source: data, Target: "/home/work/data", ReadOnly: true}}
	spec.Env = append(spec.Env, "NVIDIA_VISIBLE_DEVICES=0", "FOO=bar")
	c := runtimetest.Start(t, r, spec)
	runtimetest.WaitExit(t, c, 10*time.Second)
	got := strings.Split(runtimetest.ReadFile(t, log), "\x1f")
	want := []string{"exec", "--containall", "--cleanenv", "--uts", "--hostname", "sub2",
		"--home", filepath.Join(spec.Dir, "home") + ":/home/work", "--pwd", "/home/work/data",
		"--bind", data + ":/home/work/data:ro",
		"--bind", init + ":" + runtime.InitPath + ":ro",
		"--nv", sifPath, runtime.InitPath, "run", "--", "true"}
	if !slices.Equal(got, want) {
		t.Errorf("apptainer command line\n got %q\nwant %q", got, want)
	}
}
