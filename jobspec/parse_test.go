package jobspec_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/troupe-hpc/troupe/jobspec"
)

var update = flag.Bool("update", false, "rewrite the golden .err files of testdata/jobs/broken")

const jobsDir = "../testdata/jobs"

// parse parses testdata/jobs/name, naming it name in diagnostics.
func parse(t *testing.T, name string) (*jobspec.Job, hcl.Diagnostics) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(jobsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return jobspec.Parse(name, src)
}

func mustParse(t *testing.T, name string) *jobspec.Job {
	t.Helper()
	j, diags := parse(t, name)
	if diags.HasErrors() || j == nil {
		t.Fatalf("Parse(%s):\n%s", name, jobspec.FormatDiagnostics(diags))
	}
	return j
}

func TestParseValid(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		file  string
		check func(t *testing.T, j *jobspec.Job)
	}{
		{"train.hcl", func(t *testing.T, j *jobspec.Job) {
			want := &jobspec.Job{
				Name: "train", Partition: "gpu", Account: "vision",
				Walltime: 2 * time.Hour, Priority: 0,
				Cluster:   jobspec.Cluster{Size: 4, Mode: jobspec.ModeMultiNode},
				Resources: jobspec.Resources{CPU: 4, Memory: 16 * gib, GPU: 0.5},
				Image:     "pytorch-2.3",
				Command:   []string{"mpirun", "python", "train.py"},
				Workdir:   "/home/work/data",
				Env:       map[string]string{"EPOCHS": "10"},
				Mounts: []jobspec.Mount{{
					Name: "data", Source: "/shared/datasets/imagenet",
					Target: "/home/work/data", ReadOnly: true,
				}},
				Output: "train-%j.out",
			}
			got := *j
			got.Ranges = nil
			if !reflect.DeepEqual(&got, want) {
				t.Errorf("got  %+v\nwant %+v", got, *want)
			}
			if r := j.Range("cluster.size"); r == nil || r.Start.Line != 8 || r.Start.Column != 12 {
				t.Errorf(`Range("cluster.size") = %v, want train.hcl:8:12`, r)
			}
		}},
		{"single.hcl", func(t *testing.T, j *jobspec.Job) {
			eq(t, "name", j.Name, "hello")
			eq(t, "cluster", j.Cluster, jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode})
			eq(t, "resources", j.Resources, jobspec.Resources{CPU: 1, Memory: gib})
			eq(t, "workdir", j.Workdir, "/home/work")
			eq(t, "walltime", j.Walltime, time.Duration(0))
			eq(t, "replicas", j.Replicas(), "main:1")
		}},
		{"roles.hcl", func(t *testing.T, j *jobspec.Job) {
			eq(t, "walltime", j.Walltime, 90*time.Minute)
			eq(t, "size", j.Cluster.Size, 4)
			eq(t, "replicas", j.Replicas(), "main:1,sub:3")
			eq(t, "roles", len(j.Roles), 2)
			eq(t, "main resources", *j.Roles[0].Resources, jobspec.Resources{CPU: 2, Memory: 8 * gib})
		}},
		{"hetero.hcl", func(t *testing.T, j *jobspec.Job) {
			eq(t, "walltime", j.Walltime, 48*time.Hour)
			eq(t, "priority", j.Priority, -100)
			eq(t, "size", j.Cluster.Size, 7)
			eq(t, "memory", j.Resources.Memory, int64(2*gib))
			eq(t, "replicas", j.Replicas(), "main:1,ps:2,worker:4")
			eq(t, "worker resources", *j.Roles[1].Resources, jobspec.Resources{CPU: 4, Memory: 2 * gib, GPU: 2})
		}},
		{"exprs.hcl", func(t *testing.T, j *jobspec.Job) {
			eq(t, "walltime", j.Walltime, 90*time.Minute)
			eq(t, "cluster", j.Cluster, jobspec.Cluster{Size: 4, Mode: jobspec.ModeMultiNode})
			eq(t, "resources", j.Resources, jobspec.Resources{CPU: 1.5, Memory: gib / 2, GPU: 0.25})
			eq(t, "image", j.Image, "CUDA")
			eq(t, "command", j.Command, []string{"python", "train.py", "--epochs", "10", "exp-a7"})
			eq(t, "env", j.Env, map[string]string{"EPOCHS": "10", "NAME": "exp-a7", "OMP_NUM_THREADS": "4"})
			eq(t, "mount", j.Mounts[0], jobspec.Mount{
				Name: "data", Source: "/shared/datasets/imagenet-2012", Target: "/home/work/imagenet-2012"})
			eq(t, "output", j.Output, "exp-a7-%j-%h.out")
		}},
		{"job.json", func(t *testing.T, j *jobspec.Job) {
			eq(t, "name", j.Name, "train-json")
			eq(t, "walltime", j.Walltime, 45*time.Minute)
			eq(t, "cluster", j.Cluster, jobspec.Cluster{Size: 2, Mode: jobspec.ModeMultiNode})
			eq(t, "resources", j.Resources, jobspec.Resources{CPU: 0.5, Memory: gib / 2, GPU: 1})
			eq(t, "mount", j.Mounts[0], jobspec.Mount{Name: "scratch", Source: "/scratch", Target: "/home/work/scratch"})
			eq(t, "replicas", j.Replicas(), "main:1,sub:1")
			eq(t, "sub command", j.Containers()[1].Command, []string{"sleep", "infinity"})
		}},
		{"apps.hcl", func(t *testing.T, j *jobspec.Job) {
			eq(t, "services", j.Services, []jobspec.Service{
				{Name: "jupyter", Port: 8888, Protocol: jobspec.ProtocolHTTP, KeepPrefix: true},
				{Name: "board", Port: 6006, Protocol: jobspec.ProtocolHTTP},
			})
			eq(t, "service board", j.Service("board"), &j.Services[1])
			if j.Service("ssh") != nil {
				t.Errorf("Service(ssh) = %v, want nil", j.Service("ssh"))
			}
		}},
		{"hello-cluster.hcl", func(t *testing.T, j *jobspec.Job) {
			eq(t, "replicas", j.Replicas(), "main:1,sub:2")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(jobsDir, tt.file)); os.IsNotExist(err) {
				t.Skipf("%s is not there", tt.file)
			}
			j, diags := parse(t, tt.file)
			if len(diags) > 0 || j == nil {
				t.Fatalf("Parse: want no diagnostics, got:\n%s", jobspec.FormatDiagnostics(diags))
			}
			if d := j.Validate(); len(d) > 0 {
				t.Errorf("Validate after Parse:\n%s", jobspec.FormatDiagnostics(d))
			}
			tt.check(t, j)
		})
	}
}

func eq[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}

// TestParseBroken parses every file under testdata/jobs/broken and
// compares its diagnostics, one FormatDiagnostic line each, with the
// golden file beside it (NAME.err); go test -update rewrites those.
func TestParseBroken(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(jobsDir, "broken", "*"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, path := range files {
		if strings.HasSuffix(path, ".err") {
			continue
		}
		n++
		name := filepath.ToSlash(strings.TrimPrefix(path, jobsDir+string(filepath.Separator)))
		t.Run(filepath.Base(name), func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			j, diags := jobspec.Parse(name, src)
			if j != nil || !diags.HasErrors() {
				t.Fatalf("Parse: want errors and no job, got job %v, diagnostics:\n%s", j, jobspec.FormatDiagnostics(diags))
			}
			got := jobspec.FormatDiagnostics(diags)
			golden := path + ".err"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("diagnostics differ from %s\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
			for _, d := range diags {
				if d.Subject == nil || d.Subject.Filename != name || d.Subject.Start.Line == 0 {
					t.Errorf("diagnostic without a position in %s: %s", name, jobspec.FormatDiagnostic(d))
				}
			}
			var buf bytes.Buffer
			if err := jobspec.WriteDiagnostics(&buf, name, src, diags); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			if c := strings.Count(out, "Error: "); c != len(diags.Errs()) {
				t.Errorf("WriteDiagnostics wrote %d \"Error: \" for %d errors:\n%s", c, len(diags.Errs()), out)
			}
			if !strings.Contains(out, "on "+name+" line ") {
				t.Errorf("WriteDiagnostics output does not name %q:\n%s", "on "+name+" line ", out)
			}
		})
	}
	if n < 14 {
		t.Errorf("found %d broken job files, want at least 14", n)
	}
}

func TestParseFile(t *testing.T) {
	j, diags := jobspec.ParseFile(filepath.Join(jobsDir, "train.hcl"))
	if diags.HasErrors() || j.Name != "train" {
		t.Fatalf("ParseFile: %v %s", j, jobspec.FormatDiagnostics(diags))
	}
	if r := j.Range(""); r == nil || r.Filename != filepath.Join(jobsDir, "train.hcl") {
		t.Errorf("Range(\"\") = %v, want the path given to ParseFile", r)
	}
	_, diags = jobspec.ParseFile(filepath.Join(jobsDir, "nonexistent.hcl"))
	if !diags.HasErrors() || !strings.Contains(diags[0].Detail, "no such file") {
		t.Errorf("ParseFile(nonexistent): %s", jobspec.FormatDiagnostics(diags))
	}
}

// TestParseErrors covers errors with no file of their own: the file
// level, variables and locals.
func TestParseErrors(t *testing.T) {
	const ok = `image = "host"
  command = ["true"]`
	tests := []struct {
		name, src string
		want      []string // FormatDiagnostic prefixes, in order
	}{
		{"no job", `locals { a = 1 }`, []string{"t.hcl:1:1: Missing job block"}},
		{"two jobs", "job \"a\" {\n" + ok + "\n}\njob \"b\" {\n" + ok + "\n}",
			[]string{"t.hcl:5:1: Duplicate job block"}},
		{"top-level attribute", "image = \"x\"\njob \"a\" {\n" + ok + "\n}",
			[]string{`t.hcl:1:1: Unsupported argument; An argument named "image" is not expected here.`}},
		{"nearest argument suggested", "job \"a\" {\n" + ok + "\n  resources { gpus = 1 }\n}",
			[]string{`t.hcl:4:15: Unsupported argument; An argument named "gpus" is not expected here. Did you mean "gpu"?`}},
		{"nearest block suggested", "job \"a\" {\n" + ok + "\n  resource { cpu = 1 }\n}",
			[]string{`t.hcl:4:3: Unsupported block type; Blocks of type "resource" are not expected here. Did you mean "resources"?`}},
		{"unknown variable", "job \"a\" {\n" + ok + "\n  workdir = var.dir\n}",
			[]string{`t.hcl:4:16: Unsupported attribute; This object does not have an attribute named "dir".`}},
		{"unknown function", "job \"a\" {\n" + ok + "\n  workdir = nope(1)\n}",
			[]string{`t.hcl:4:13: Call to unknown function`}},
		{"variable without value", "variable \"x\" {}\njob \"a\" {\n" + ok + "\n}",
			[]string{`t.hcl:1:1: Missing variable value`}},
		{"variable of wrong type", "variable \"x\" {\n  type = number\n  default = \"many\"\n}\njob \"a\" {\n" + ok + "\n}",
			[]string{`t.hcl:3:13: Invalid value for variable`}},
		{"variable argument misspelt", "variable \"x\" {\n  defualt = 1\n}\njob \"a\" {\n" + ok + "\n}",
			[]string{`t.hcl:2:3: Unsupported argument; An argument named "defualt" is not expected here. Did you mean "default"?`}},
		{"variable block inside", "variable \"x\" {\n  default = 1\n  validation {}\n}\njob \"a\" {\n" + ok + "\n}",
			[]string{`t.hcl:3:3: Unsupported block type; Blocks of type "validation" are not expected here.`}},
		{"variable description not text", "variable \"x\" {\n  default = 1\n  description = [\"a\"]\n}\njob \"a\" {\n" + ok + "\n}",
			[]string{`t.hcl:3:17: Unsuitable value type; Unsuitable value for description:`}},
		{"locals cycle", "locals {\n  a = local.b\n  b = local.a\n}\njob \"a\" {\n" + ok + "\n  workdir = local.a\n}",
			[]string{`t.hcl:2:7: Circular local value`, `t.hcl:3:7: Circular local value`}},
		{"duplicate block", "job \"a\" {\n" + ok + "\n  cluster {}\n  cluster {}\n}",
			[]string{`t.hcl:5:3: Duplicate cluster block`}},
		{"wrong type", "job \"a\" {\n" + ok + "\n  cluster { size = \"four\" }\n}",
			[]string{`t.hcl:4:20: Incorrect attribute value type; Inappropriate value for attribute "size": a number is required.`}},
		{"fractional size", "job \"a\" {\n" + ok + "\n  cluster { size = 2.5 }\n}",
			[]string{`t.hcl:4:20: Invalid size; size 2.5 is not valid; it must be a whole number.`}},
		{"size too large", "job \"a\" {\n" + ok + "\n  cluster { size = 2000 }\n}",
			[]string{`t.hcl:4:20: Invalid cluster size`}},
		// A session's network holds 253 containers: a larger job is
		// refused here, where the file wrote its size.
		{"size past a session's network", "job \"a\" {\n" + ok + "\n  cluster {\n    size = 300\n    mode = \"multi-node\"\n  }\n}",
			[]string{`t.hcl:5:12: Invalid cluster size; cluster size 300 is not valid; use 1 (main1 alone) to 253 containers, the most one session's network holds.`}},
		// The kernel enforces no CPU quota under 10 millicores.
		{"cpu under the kernel's least", "job \"a\" {\n" + ok + "\n  resources { cpu = 0.0004 }\n}",
			[]string{`t.hcl:4:21: Invalid cpu; cpu 0.0004 is not valid; the least a container may have is 0.01 (10 millicores, the smallest CPU quota the kernel enforces).`}},
		{"cpu rounding under 10 millicores", "job \"a\" {\n" + ok + "\n  resources { cpu = 0.0094 }\n}",
			[]string{`t.hcl:4:21: Invalid cpu; cpu 0.0094 is not valid`}},
		{"role cpu under the kernel's least", "job \"a\" {\n" + ok + "\n  cluster { size = 2 }\n  role \"ps\" {\n    replicas = 1\n    resources { cpu = 0.005 }\n  }\n}",
			[]string{`t.hcl:7:23: Invalid cpu; cpu 0.005 is not valid`}},
		{"command as string", "job \"a\" {\n  image = \"host\"\n  command = \"python train.py\"\n}",
			[]string{`t.hcl:3:13: Incorrect attribute value type; Inappropriate value for attribute "command": list of string required, but have string.`}},
		{"main replicas", "job \"a\" {\n" + ok + "\n  role \"main\" { replicas = 2 }\n}",
			[]string{`t.hcl:4:28: Invalid replicas`}},
		{"duplicate role", "job \"a\" {\n" + ok + "\n  role \"ps\" {}\n  role \"ps\" {}\n}",
			[]string{`t.hcl:5:8: Duplicate role`}},
		{"sub replicas mismatch", "job \"a\" {\n" + ok + "\n  cluster { size = 4 }\n  role \"sub\" { replicas = 2 }\n}",
			[]string{`t.hcl:4:20: Cluster size does not match roles; cluster size is 4, but the roles add up to 3 containers (main 1, sub 2); set size = 3 or leave size out.`}},
		{"size mismatch hint", "job \"a\" {\n" + ok + "\n  cluster { size = 8 }\n  role \"w\" { replicas = 4 }\n}",
			[]string{`t.hcl:4:20: Cluster size does not match roles; cluster size is 8, but the roles add up to 5 containers (main 1, w 4); set size = 5 or leave size out, or add role "sub" { replicas = 3 } to fill the rest with subs.`}},
		{"mount missing target", "job \"a\" {\n" + ok + "\n  mount \"m\" { source = \"/x\" }\n}",
			[]string{`t.hcl:4:15: Missing required argument; The argument "target" is required`}},
		{"mount under /dev", "job \"a\" {\n" + ok + "\n  mount \"m\" {\n    source = \"/x\"\n    target = \"/dev/shm\"\n  }\n}",
			[]string{`t.hcl:6:14: Invalid mount target; mount "m" target "/dev/shm" is inside /dev`}},
		{"mount under /.troupe", "job \"a\" {\n" + ok + "\n  mount \"m\" {\n    source = \"/x\"\n    target = \"/.troupe/bin/troupe-init\"\n  }\n}",
			[]string{`t.hcl:6:14: Invalid mount target; mount "m" target "/.troupe/bin/troupe-init" is inside /.troupe, which troupe sets up`}},
		{"mount at /etc/hosts", "job \"a\" {\n" + ok + "\n  mount \"m\" {\n    source = \"/x\"\n    target = \"/etc/hosts\"\n  }\n}",
			[]string{`t.hcl:6:14: Invalid mount target; mount "m" target "/etc/hosts" is /etc/hosts, which troupe sets up`}},
		{"mount at root", "job \"a\" {\n" + ok + "\n  mount \"m\" {\n    source = \"/x\"\n    target = \"/\"\n  }\n}",
			[]string{`t.hcl:6:14: Invalid mount target; mount "m" target "/" would hide`}},
		{"duplicate mount name", "job \"a\" {\n" + ok + "\n  mount \"m\" {\n    source = \"/x\"\n    target = \"/x\"\n  }\n  mount \"m\" {\n    source = \"/y\"\n    target = \"/y\"\n  }\n}",
			[]string{`t.hcl:8:9: Duplicate mount name`}},
		{"bad job name", "job \"my job!\" {\n" + ok + "\n}", []string{`t.hcl:1:5: Invalid job name`}},
		{"gpu negative", "job \"a\" {\n" + ok + "\n  resources { gpu = -1 }\n}", []string{`t.hcl:4:21: Invalid gpu`}},
		{"memory type", "job \"a\" {\n" + ok + "\n  resources { memory = [1] }\n}", []string{`t.hcl:4:24: Invalid memory`}},
		{"negative walltime", "job \"a\" {\n" + ok + "\n  walltime = \"-1h\"\n}", []string{`t.hcl:4:14: Invalid walltime`}},
		{"priority too low", "job \"a\" {\n" + ok + "\n  priority = -20000\n}", []string{`t.hcl:4:14: Invalid priority`}},
		{"bad error pattern", "job \"a\" {\n" + ok + "\n  error = \"e-%x.err\"\n}",
			[]string{`t.hcl:4:14: Invalid error pattern; error "e-%x.err" holds "%x", which is not a valid escape`}},
		{"empty program", "job \"a\" {\n  image = \"host\"\n  command = [\"\", \"x\"]\n}", []string{`t.hcl:3:14: Invalid command`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, diags := jobspec.Parse("t.hcl", []byte(tt.src))
			errs := diags.Errs()
			if j != nil || len(errs) != len(tt.want) {
				t.Fatalf("got job %v and %d errors, want nil and %d:\n%s", j != nil, len(errs), len(tt.want), jobspec.FormatDiagnostics(diags))
			}
			for i, d := range diags {
				if got := jobspec.FormatDiagnostic(d); !strings.HasPrefix(got, tt.want[i]) {
					t.Errorf("diagnostic %d:\ngot  %s\nwant %s…", i, got, tt.want[i])
				}
			}
		})
	}
}

// TestParseBounds: the least cpu and the largest session are taken, as
// the millicores and containers they are (cpu 0.0096 is 10 millicores).
func TestParseBounds(t *testing.T) {
	for _, body := range []string{
		"resources { cpu = 0.01 }",
		"resources { cpu = 0.0096 }",
		"cluster {\n    size = 253\n    mode = \"multi-node\"\n  }",
	} {
		src := "job \"a\" {\n  image = \"host\"\n  command = [\"true\"]\n  " + body + "\n}"
		if j, diags := jobspec.Parse("t.hcl", []byte(src)); j == nil || diags.HasErrors() {
			t.Errorf("%s: %s", body, jobspec.FormatDiagnostics(diags))
		}
	}
}

func TestParseError(t *testing.T) {
	j, diags := jobspec.Parse("t.hcl", []byte("job \"a\" {\n  image = \"host\"\n  command = [\"true\"]\n  error = \"%j.%h.err\"\n}"))
	if diags.HasErrors() || j.Error != "%j.%h.err" || j.Output != "" {
		t.Fatalf("error = %q, output %q:\n%s", j.Error, j.Output, jobspec.FormatDiagnostics(diags))
	}
}

func TestParseWarnings(t *testing.T) {
	src := "job \"a\" {\n  image = \"host\"\n  command = [\"true\"]\n  resources { memory = 1024 }\n}"
	j, diags := jobspec.Parse("t.hcl", []byte(src))
	if j == nil || len(diags) != 1 || diags[0].Severity != hcl.DiagWarning {
		t.Fatalf("want a job and one warning, got %v:\n%s", j, jobspec.FormatDiagnostics(diags))
	}
	want := `t.hcl:4:24: warning: Very little memory; memory 1024 is 1024 bytes; a number without a unit counts bytes. Did you mean "1024MiB"?`
	if got := jobspec.FormatDiagnostic(diags[0]); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if j.Resources.Memory != 1024 {
		t.Errorf("memory = %d, want 1024", j.Resources.Memory)
	}
}

func TestParseWithVars(t *testing.T) {
	src := []byte(`
variable "nodes" {
  type    = number
  default = 2
}
variable "tag" {
  default     = "small"
  description = "the image's tag"
}
variable "args" {
  type    = list(string)
  default = []
}
job "v" {
  image   = "img-${var.tag}"
  command = concat(["run"], var.args)
  cluster { size = var.nodes }
}`)
	j, diags := jobspec.ParseWith("v.hcl", src, jobspec.Options{Vars: map[string]string{
		"nodes": "8", "tag": "large", "args": `["-v", "--fast"]`,
	}})
	if diags.HasErrors() {
		t.Fatal(jobspec.FormatDiagnostics(diags))
	}
	eq(t, "size", j.Cluster.Size, 8)
	eq(t, "image", j.Image, "img-large")
	eq(t, "command", j.Command, []string{"run", "-v", "--fast"})

	_, diags = jobspec.ParseWith("v.hcl", src, jobspec.Options{Vars: map[string]string{"nodes": "many", "nope": "1"}})
	got := jobspec.FormatDiagnostics(diags)
	for _, want := range []string{"Undeclared variable", "There is no variable named \"many\""} {
		if !strings.Contains(got, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, got)
		}
	}
}

// TestRange checks the fallbacks of Job.Range.
func TestRange(t *testing.T) {
	j := mustParse(t, "train.hcl")
	tests := []struct {
		path      string
		line, col int
	}{
		{"", 1, 1},
		{"name", 1, 5},
		{"cluster", 7, 3},
		{"cluster.mode", 9, 12},
		{"resources.memory", 14, 14},
		{"env.EPOCHS", 21, 15},
		{"mounts.0.target", 25, 16},
		{"mounts.0.name", 23, 9},
		{"command.2", 19, 34},
		{"partition", 2, 15},
		{"roles.3.image", 1, 1}, // not written: the job block
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r := j.Range(tt.path)
			if r == nil || r.Start.Line != tt.line || r.Start.Column != tt.col {
				t.Errorf("Range(%q) = %v, want line %d col %d", tt.path, r, tt.line, tt.col)
			}
		})
	}
	if r := (&jobspec.Job{}).Range("cluster.size"); r != nil {
		t.Errorf("Range on a Job without ranges = %v, want nil", r)
	}
}

// TestValidateWithoutRanges validates a Job that did not come from a
// file, as schedd does with API bodies.
func TestValidateWithoutRanges(t *testing.T) {
	j := &jobspec.Job{
		Name:      "api",
		Cluster:   jobspec.Cluster{Size: 2, Mode: "multinode"},
		Resources: jobspec.Resources{CPU: 1, Memory: 1 << 30, GPU: 1.5},
		Image:     "host",
		Command:   []string{"true"},
	}
	diags := j.Validate()
	want := "Invalid cluster mode; cluster mode \"multinode\" is not valid; use \"single-node\" or \"multi-node\".\n" +
		"Invalid gpu; gpu 1.5 is not valid; a request above one GPU must be whole (1 or 2); fractions are for one shared GPU (0 < gpu <= 1).\n"
	if got := jobspec.FormatDiagnostics(diags); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// TestValidateRefusesCredentialEnv: a job that names a troupe client's
// credential in its env is refused, whatever sent it, so that schedd's
// admission keeps the token out of the raft log.
func TestValidateRefusesCredentialEnv(t *testing.T) {
	j := &jobspec.Job{
		Name:      "leak",
		Cluster:   jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
		Resources: jobspec.Resources{CPU: 1, Memory: 1 << 30},
		Image:     "host",
		Command:   []string{"true"},
		Env:       map[string]string{"TROUPE_TOKEN": "tk-secret", "A": "1"},
	}
	got := jobspec.FormatDiagnostics(j.Validate())
	if !strings.HasPrefix(got, "Credential in the environment; env TROUPE_TOKEN holds a troupe client's credential") || strings.Count(got, "\n") != 1 {
		t.Errorf("got:\n%s\nwant the one refusal of env TROUPE_TOKEN", got)
	}
}
