package script

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/jobspec"
)

func TestDetect(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      Kind
	}{
		{"train.hcl", "#!/bin/sh\necho", KindJobFile},
		{"job", "# a comment\njob \"x\" {\n  image = \"host\"\n}\n", KindJobFile},
		{"job", "variable \"n\" {\n default = 1\n}\njob \"x\" {}\n", KindJobFile},
		{"run.sh", "#!/bin/bash\necho hi\n", KindScript},
		{"run", "# no shebang\n#BSUB -n 4\necho hi\n", KindScript},
		{"run", "#SBATCH -N 2\nsrun hostname\n", KindScript},
		{"stdin", "echo hello > out\n", KindScript},
		{"stdin", "x = 1\n", KindScript}, // an attribute, no block: a shell line
		{"weird.txt", "job \"x\" {", KindScript},
	} {
		if got := Detect(c.name, []byte(c.src)); got != c.want {
			t.Errorf("Detect(%q, %q) = %v, want %v", c.name, c.src, got, c.want)
		}
	}
}

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{` -n 4 -W 10`, []string{"-n", "4", "-W", "10"}},
		{` -R "rusage[mem=4000] span[hosts=1]"`, []string{"-R", "rusage[mem=4000] span[hosts=1]"}},
		{` -J 'my job' # a comment`, []string{"-J", "my job"}},
		{` -o a\ b "x\"y"`, []string{"-o", "a b", `x"y`}},
		{` -J a#b`, []string{"-J", "a#b"}},
	} {
		got, err := split(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("split(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := split(` -J "open`); err == nil {
		t.Error(`split of an open quote: no error`)
	}
}

// job parses src, applies the command-line options and builds the job in
// /tmp/sub with environ.
func job(t *testing.T, src string, cmdline [][2]string, environ ...string) (*jobspec.Job, []Warning) {
	t.Helper()
	s, err := Parse([]byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	for _, kv := range cmdline {
		if known, err := s.Options.Set(kv[0], kv[1]); !known || err != nil {
			t.Fatalf("Set(%q, %q) = %v, %v", kv[0], kv[1], known, err)
		}
	}
	j, err := s.Options.Job(Submit{Cwd: "/tmp/sub", Environ: environ, Script: s, Name: "run.sh"})
	if err != nil {
		t.Fatalf("Job: %v", err)
	}
	if diags := j.Validate(); diags.HasErrors() {
		t.Fatalf("the job does not validate: %v", diags)
	}
	return j, s.Options.Warnings
}

func TestShape(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		name      string
		src       string
		size      int
		mode      string
		cpu       float64
		mem       int64
		gpu       float64
		walltime  time.Duration
		partition string
		account   string
	}{
		{"defaults", "#!/bin/sh\necho\n", 1, jobspec.ModeSingleNode, 1, gib, 0, 0, "", ""},
		{"lsf slots one host", "#BSUB -n 8\n#BSUB -R \"span[hosts=1]\"\n", 1, jobspec.ModeSingleNode, 8, gib, 0, 0, "", ""},
		{"lsf slots default", "#BSUB -n 8\n", 1, jobspec.ModeSingleNode, 8, gib, 0, 0, "", ""},
		{"lsf ptile", "#BSUB -n 8 -R 'span[ptile=2]'\n", 4, jobspec.ModeMultiNode, 2, gib, 0, 0, "", ""},
		{"lsf ptile uneven", "#BSUB -n 7\n#BSUB -R span[ptile=3]\n", 3, jobspec.ModeMultiNode, 3, gib, 0, 0, "", ""},
		{"lsf nnodes", "#BSUB -n 8 -nnodes 2\n", 2, jobspec.ModeMultiNode, 4, gib, 0, 0, "", ""},
		{"lsf mem KB", "#BSUB -M 2097152\n", 1, jobspec.ModeSingleNode, 1, 2 * gib, 0, 0, "", ""},
		{"lsf mem unit", "#BSUB -M 3GB\n", 1, jobspec.ModeSingleNode, 1, 3 * gib, 0, 0, "", ""},
		{"lsf rusage", "#BSUB -R \"select[mem>=1048576] rusage[mem=2GB]\"\n", 1, jobspec.ModeSingleNode, 1, 2 * gib, 0, 0, "", ""},
		{"lsf rusage per slot", "#BSUB -n 4 -R \"rusage[mem=524288.0] span[hosts=1]\"\n", 1, jobspec.ModeSingleNode, 4, 2 * gib, 0, 0, "", ""},
		{"lsf select beats rusage", "#BSUB -n 2 -R \"select[mem>=3GB] rusage[mem=1GB]\"\n", 1, jobspec.ModeSingleNode, 2, 3 * gib, 0, 0, "", ""},
		{"lsf select", "#BSUB -R \"select[mem>4GB]\"\n", 1, jobspec.ModeSingleNode, 1, 4 * gib, 0, 0, "", ""},
		{"lsf gpu", "#BSUB -gpu num=2\n", 1, jobspec.ModeSingleNode, 1, gib, 2, 0, "", ""},
		{"lsf walltime", "#BSUB -W 1:30 -q short -G physics\n", 1, jobspec.ModeSingleNode, 1, gib, 0, 90 * time.Minute, "short", "physics"},
		{"lsf project wins", "#BSUB -G physics -P proj\n", 1, jobspec.ModeSingleNode, 1, gib, 0, 0, "", "proj"},
		{"slurm nodes tasks", "#!/bin/bash\n#SBATCH -N 2\n#SBATCH --ntasks=8\n#SBATCH -c 2\n", 2, jobspec.ModeMultiNode, 8, gib, 0, 0, "", ""},
		{"slurm per node", "#SBATCH --nodes=3 --ntasks-per-node=4\n", 3, jobspec.ModeMultiNode, 4, gib, 0, 0, "", ""},
		{"slurm mem", "#SBATCH --mem=4G -t 30\n", 1, jobspec.ModeSingleNode, 1, 4 * gib, 0, 30 * time.Minute, "", ""},
		{"slurm mem MB", "#SBATCH --mem 2048 -t 1-00:00:00\n", 1, jobspec.ModeSingleNode, 1, 2 * gib, 0, 24 * time.Hour, "", ""},
		{"slurm mem per cpu", "#SBATCH -n 4 --mem-per-cpu=1G\n", 1, jobspec.ModeSingleNode, 4, 4 * gib, 0, 0, "", ""},
		{"slurm gres", "#SBATCH --gres=gpu:a100:2 -p gpu -A ml\n", 1, jobspec.ModeSingleNode, 1, gib, 2, 0, "gpu", "ml"},
		{"slurm mm:ss", "#SBATCH --time=10:30\n", 1, jobspec.ModeSingleNode, 1, gib, 0, 10*time.Minute + 30*time.Second, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, _ := job(t, c.src, nil)
			if j.Cluster.Size != c.size || j.Cluster.Mode != c.mode || j.Resources.CPU != c.cpu || j.Resources.Memory != c.mem || j.Resources.GPU != c.gpu {
				t.Errorf("got size %d %s, cpu %v mem %d gpu %v; want size %d %s, cpu %v mem %d gpu %v",
					j.Cluster.Size, j.Cluster.Mode, j.Resources.CPU, j.Resources.Memory, j.Resources.GPU, c.size, c.mode, c.cpu, c.mem, c.gpu)
			}
			if j.Walltime != c.walltime || j.Partition != c.partition || j.Account != c.account {
				t.Errorf("walltime %v partition %q account %q; want %v %q %q", j.Walltime, j.Partition, j.Account, c.walltime, c.partition, c.account)
			}
		})
	}
}

func TestCommandLineWins(t *testing.T) {
	j, _ := job(t, "#BSUB -n 2 -J fromscript -W 10\n", [][2]string{{"-n", "6"}, {"-J", "fromcli"}})
	if j.Resources.CPU != 6 || j.Name != "fromcli" || j.Walltime != 10*time.Minute {
		t.Errorf("cpu %v name %q walltime %v; want 6, fromcli, 10m", j.Resources.CPU, j.Name, j.Walltime)
	}
}

func TestStopsAtFirstCommand(t *testing.T) {
	j, _ := job(t, "#!/bin/sh\n# comment\n\n#BSUB -n 2\necho hi\n#BSUB -n 9\n", nil)
	if j.Resources.CPU != 2 {
		t.Errorf("cpu %v: a #BSUB after the first command must be ignored", j.Resources.CPU)
	}
}

func TestWhereAndAs(t *testing.T) {
	j, _ := job(t, "#!/bin/bash\n#BSUB -o out.%J.%x -e err.%J -J fit\necho hi\n", nil,
		"PATH=/opt/bin:/usr/bin", "HOME=/home/alice", "USER=root", "LANG=C.UTF-8", "PWD=/elsewhere", "BACKENDAI_X=1", "BASH_FUNC_f%%=() {}", "HOSTNAME=login1")
	want := &jobspec.Job{
		Name:      "fit",
		Cluster:   jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
		Resources: jobspec.Resources{CPU: 1, Memory: 1 << 30},
		Image:     "host",
		Command:   []string{"/bin/bash", "-c", "#!/bin/bash\n#BSUB -o out.%J.%x -e err.%J -J fit\necho hi\n", "run.sh"},
		Workdir:   "/tmp/sub",
		Env:       map[string]string{"PATH": "/opt/bin:/usr/bin", "LANG": "C.UTF-8"},
		Mounts:    []jobspec.Mount{{Name: "cwd", Source: "/tmp/sub", Target: "/tmp/sub"}},
		Output:    "out.%j.fit",
		Error:     "err.%j",
	}
	if !reflect.DeepEqual(j, want) {
		t.Errorf("got\n%+v\nwant\n%+v", j, want)
	}
}

func TestCwdOption(t *testing.T) {
	j, _ := job(t, "#BSUB -cwd /data/run -o out.%J -e /abs/err\n", nil)
	if j.Output != "/data/run/out.%j" || j.Error != "/abs/err" {
		t.Errorf("-cwd: output %q error %q: relative paths are the job directory's", j.Output, j.Error)
	}
	for _, c := range []struct{ src, want string }{
		{"#BSUB -cwd /data/run\n", "/data/run"},
		{"#BSUB -cwd sub/dir\n", "/tmp/sub/sub/dir"},
		{"#SBATCH -D /scratch\n", "/scratch"},
		{"#SBATCH --chdir=/\n", "/"},
	} {
		j, _ := job(t, c.src, nil)
		if j.Workdir != c.want {
			t.Errorf("%q: workdir %q, want %q", c.src, j.Workdir, c.want)
		}
		if c.want == "/" && len(j.Mounts) != 0 {
			t.Errorf("%q: / must not be mounted: %+v", c.src, j.Mounts)
		}
	}
}

func TestEnvPolicy(t *testing.T) {
	environ := []string{"A=1", "B=2", "C=3"}
	for _, c := range []struct {
		src  string
		want map[string]string
	}{
		{"#BSUB -n 1\n", map[string]string{"A": "1", "B": "2", "C": "3"}},
		{"#BSUB -env none\n", nil},
		{"#BSUB -env \"all, ~B\"\n", map[string]string{"A": "1", "C": "3"}},
		{"#BSUB -env \"A, D=4\"\n", map[string]string{"A": "1", "D": "4"}},
		{"#SBATCH --export=NONE\n", nil},
		{"#SBATCH --export=ALL,D=4\n", map[string]string{"A": "1", "B": "2", "C": "3", "D": "4"}},
		{"#SBATCH --export=C\n", map[string]string{"C": "3"}},
	} {
		j, _ := job(t, c.src, nil, environ...)
		if !reflect.DeepEqual(j.Env, c.want) {
			t.Errorf("%q: env %v, want %v", c.src, j.Env, c.want)
		}
	}
}

func TestArrayDirectives(t *testing.T) {
	for _, c := range []struct {
		src, name string
		want      jobspec.Array
	}{
		{"#BSUB -J \"sweep[1-100%10]\"\n", "sweep", jobspec.Array{Range: "1-100", MaxRunning: 10}},
		{"#BSUB -J \"sweep[1-100]%10\"\n", "sweep", jobspec.Array{Range: "1-100", MaxRunning: 10}},
		{"#BSUB -J sweep[1,3,5-9:2]\n", "sweep", jobspec.Array{Range: "1,3,5-9:2"}},
		{"#SBATCH --array=1-100:2%10 -J sweep\n", "sweep", jobspec.Array{Range: "1-99:2", MaxRunning: 10}},
		{"#SBATCH -a 0-3\n#SBATCH --job-name=sweep\n", "sweep", jobspec.Array{Range: "0-3"}},
	} {
		j, warns := job(t, c.src, nil)
		if j.Array == nil || *j.Array != c.want || j.Name != c.name {
			t.Errorf("%q: name %q array %+v, want %q %+v", c.src, j.Name, j.Array, c.name, c.want)
		}
		if len(warns) > 0 {
			t.Errorf("%q: warnings %v", c.src, warns)
		}
	}
	j, _ := job(t, "#BSUB -J plain\n", nil)
	if j.Array != nil || j.Name != "plain" {
		t.Errorf("a plain -J made %q %+v", j.Name, j.Array)
	}
}

func TestWarnings(t *testing.T) {
	src := "#!/bin/sh\n#BSUB -x -B -N -u me@x -U res -sp 10 -r -rn -b 12:00 -i in.txt -L /bin/bash\n#BSUB -x\n#BSUB -frob 3\n#SBATCH --mail-type=END --exclusive\n#SBATCH --frobnicate=2\n"
	j, warns := job(t, src, nil)
	if j.Reservation != "res" {
		t.Errorf("-U res: reservation %q", j.Reservation)
	}
	var got []string
	for _, w := range warns {
		got = append(got, w.String())
	}
	text := strings.Join(got, "\n")
	for _, opt := range []string{"-x", "-sp", "-r", "-rn", "-b", "-i", "-L"} {
		if n := strings.Count(text, "line 2: "+opt+": accepted and ignored"); n != 1 {
			t.Errorf("option %s warned %d times, want once:\n%s", opt, n, text)
		}
	}
	for _, want := range []string{
		"line 4: -frob: unknown #BSUB option; ignored",
		"line 5: --exclusive: accepted and ignored",
		"line 6: --frobnicate: unknown #SBATCH option; ignored",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("warnings lack %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "line 3") {
		t.Errorf("-x warned twice:\n%s", text)
	}
	for _, honoured := range []string{"-B", "-N", "-u", "-U", "--mail-type"} {
		if strings.Contains(text, ": "+honoured+": ") {
			t.Errorf("%s is honoured now, but warned:\n%s", honoured, text)
		}
	}
}

// TestMail (issue 14 item 6j): LSF's -B, -N, -u and Slurm's --mail-type
// and --mail-user ask for mail, where they were accepted and ignored.
func TestMail(t *testing.T) {
	for _, c := range []struct {
		src      string
		cmdline  [][2]string
		want     *jobspec.Mail
		warnings string
	}{
		{"#BSUB -B -N -u ada@example.org\n", nil, &jobspec.Mail{To: "ada@example.org", Begin: true, End: true}, ""},
		{"#BSUB -N\n", nil, &jobspec.Mail{End: true}, ""},
		{"#BSUB -u ada\n", nil, nil, ""}, // an address alone asks for nothing, as in LSF
		{"#SBATCH --mail-type=BEGIN,END,FAIL --mail-user=ada,bob@x.org\n", nil, &jobspec.Mail{To: "ada,bob@x.org", Begin: true, End: true, Fail: true}, ""},
		{"#SBATCH --mail-type=fail\n", nil, &jobspec.Mail{Fail: true}, ""},
		{"#SBATCH --mail-type=ALL\n#SBATCH --mail-type=NONE\n", nil, nil, ""},
		{"#SBATCH --mail-type=TIME_LIMIT_80,END\n", nil, &jobspec.Mail{End: true}, "line 1: --mail-type=TIME_LIMIT_80: accepted and ignored"},
		{"#!/bin/sh\n", [][2]string{{"-B", ""}, {"-u", "bob"}}, &jobspec.Mail{To: "bob", Begin: true}, ""},
	} {
		j, warns := job(t, c.src, c.cmdline)
		if !reflect.DeepEqual(j.Mail, c.want) {
			t.Errorf("%q %q: mail %+v, want %+v", c.src, c.cmdline, j.Mail, c.want)
		}
		var text []string
		for _, w := range warns {
			text = append(text, w.String())
		}
		if got := strings.Join(text, "\n"); !strings.Contains(got, c.warnings) || c.warnings == "" && got != "" {
			t.Errorf("%q: warnings %q, want %q", c.src, got, c.warnings)
		}
	}
	for _, c := range []struct{ src, want string }{
		{"#SBATCH --mail-type=SOMETIMES\n", `line 1: #SBATCH --mail-type SOMETIMES: mail type "SOMETIMES": want BEGIN, END, FAIL, ALL or NONE`},
		{"#SBATCH --mail-user=-oQ/tmp\n", `mail address "-oQ/tmp": want a user name or name@domain`},
		{"#BSUB -u 'ada\\nBcc: eve'\n", "want a user name or name@domain"},
		{"#BSUB -u \"ada <a@x>\"\n", `mail address "ada <a@x>"`},
	} {
		_, err := Parse([]byte(c.src))
		if err == nil || !errors.Is(err, ErrDirective) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v; want an ErrDirective with %q", c.src, err, c.want)
		}
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"#BSUB -n four\n", "line 1: #BSUB -n four: want a number of slots"},
		{"#!/bin/sh\n#BSUB -W soon\n", "line 2: #BSUB -W soon"},
		{"#SBATCH --mem=lots\n", "line 1: #SBATCH --mem lots"},
		{"#SBATCH -N\n", "line 1: #SBATCH --nodes: needs a value"},
		{"#BSUB -R \"span[hosts=2]\"\n", "span[hosts=2]: want hosts=1 or ptile=K"},
		{"#BSUB -env \"~A\"\n", "write \"all, ~VAR\""},
		{"#BSUB -J \"open\n", "unterminated \" quote"},
		{"#SBATCH --exclusive=user\n", "--exclusive: takes no value"},
		{"#BSUB -w 'done(x)'\n", "line 1: #BSUB -w done(x)"},
		{"#BSUB -J 'sweep[5-1]'\n", "line 1: #BSUB -J sweep[5-1]: array index term"},
		{"#SBATCH --array=1-9%0\n", "line 1: #SBATCH --array 1-9%0: array throttle"},
	} {
		_, err := Parse([]byte(c.src))
		if err == nil || !errors.Is(err, ErrDirective) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v; want an ErrDirective with %q", c.src, err, c.want)
		}
	}
	if _, err := Parse([]byte("#!\necho")); !errors.Is(err, ErrScript) {
		t.Errorf("empty shebang: %v", err)
	}
}

func TestInterpreters(t *testing.T) {
	for _, c := range []struct {
		shebang string
		want    []string
	}{
		{"", []string{"/bin/sh", "-c"}},
		{"#!/bin/bash -l", []string{"/bin/bash", "-l", "-c"}},
		{"#!/usr/bin/env bash", []string{"/usr/bin/env", "bash", "-c"}},
		{"#!/usr/bin/env python3", []string{"/usr/bin/env", "python3", "-c"}},
		{"#!/usr/bin/python3.11", []string{"/usr/bin/python3.11", "-c"}},
		{"#!/usr/bin/perl -w", []string{"/usr/bin/perl", "-w", "-e"}},
	} {
		src := c.shebang + "\necho\n"
		s, err := Parse([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		cmd, err := s.command("x.sh", []string{"a1"})
		if err != nil {
			t.Fatalf("%q: %v", c.shebang, err)
		}
		if !reflect.DeepEqual(cmd[:len(c.want)], c.want) || cmd[len(c.want)] != src || cmd[len(cmd)-1] != "a1" {
			t.Errorf("%q: command %q", c.shebang, cmd)
		}
	}
	s, _ := Parse([]byte("#!/usr/bin/awk -f\n{print}\n"))
	if _, err := s.command("x", nil); !errors.Is(err, ErrScript) {
		t.Errorf("awk: %v, want ErrScript", err)
	}
}

func TestCommandLine(t *testing.T) {
	var o Options
	for _, kv := range [][2]string{{"-n", "4"}, {"-W", "10"}, {"-o", "logs/%J.out"}} {
		if _, err := o.Set(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	j, err := o.Job(Submit{Cwd: "/tmp/sub", Command: []string{"python", "train.py", "--epochs", "3"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/bin/sh", "-c", "python train.py --epochs 3"}; !reflect.DeepEqual(j.Command, want) {
		t.Errorf("command %q, want %q", j.Command, want)
	}
	if j.Name != "python" || j.Resources.CPU != 4 || j.Walltime != 10*time.Minute || j.Output != "logs/%j.out" {
		t.Errorf("name %q cpu %v walltime %v output %q", j.Name, j.Resources.CPU, j.Walltime, j.Output)
	}
	if known, _ := o.Set("--wait", ""); known {
		t.Error("--wait is bsub's, not a script option")
	}
}

func TestExpandName(t *testing.T) {
	for _, c := range [][3]string{
		{"%x.out", "fit", "fit.out"},
		{"%%x-%x-%j", "a", "%%x-a-%j"},
		{"none", "a", "none"},
		{"%x", "50%", "50%%"},
	} {
		if got := ExpandName(c[0], c[1]); got != c[2] {
			t.Errorf("ExpandName(%q, %q) = %q, want %q", c[0], c[1], got, c[2])
		}
	}
}

func TestMemoryUnits(t *testing.T) {
	for _, c := range []struct {
		in   string
		lsf  bool
		want int64
	}{
		{"4000", true, 4000 << 10},
		{"500MB", true, 500 << 20},
		{"4G", true, 4 << 30},
		{"4000", false, 4000 << 20},
		{"1T", false, 1 << 40},
		{"512K", false, 512 << 10},
	} {
		parse := ParseSlurmMemory
		if c.lsf {
			parse = ParseLSFMemory
		}
		if got, err := parse(c.in); err != nil || got != c.want {
			t.Errorf("%q (lsf %v) = %d, %v; want %d", c.in, c.lsf, got, err, c.want)
		}
	}
	if _, err := ParseLSFMemory("4XB"); err == nil {
		t.Error("4XB: no error")
	}
}

func TestJobName(t *testing.T) {
	long := strings.Repeat("x", 70) + "_(0f3a)"
	for _, c := range [][2]string{
		{"train", "train"},
		{"Snakemake_rule_a___(1b4e28ba-2fa1-11d2-883f-0016d3cca427)", "Snakemake_rule_a____1b4e28ba-2fa1-11d2-883f-0016d3cca427_"},
		{"nf-NAME_(1)", "nf-NAME__1_"},
		{"(x)", "x_"},
		{"***", "job"},
		{long, strings.Repeat("x", 56) + "__0f3a_"},
	} {
		if got := JobName(c[0]); got != c[1] {
			t.Errorf("JobName(%q) = %q, want %q", c[0], got, c[1])
		}
	}
	j, warns := job(t, "#BSUB -J 'a(b)'\n", nil)
	if j.Name != "a_b_" || len(warns) != 1 || !strings.Contains(warns[0].String(), `-J: job name "a(b)"`) {
		t.Errorf("name %q, warnings %v", j.Name, warns)
	}
}

// TestEnvLeavesCredentials: the submitter's troupe token is not copied
// into a script job's env by any policy, not even when the policy names
// it: it would sit in the raft log and in every process of the job.
func TestEnvLeavesCredentials(t *testing.T) {
	environ := []string{"A=1", "TROUPE_TOKEN=tk-secret"}
	for _, src := range []string{
		"#BSUB -n 1\n",
		"#BSUB -env all\n",
		"#BSUB -env \"A, TROUPE_TOKEN\"\n",
		"#SBATCH --export=ALL\n",
		"#SBATCH --export=A,TROUPE_TOKEN\n",
	} {
		j, _ := job(t, src, nil, environ...)
		if _, ok := j.Env["TROUPE_TOKEN"]; ok || j.Env["A"] != "1" {
			t.Errorf("%q: env %v, want A and no TROUPE_TOKEN", src, j.Env)
		}
	}
}

// bsub's -W and a script's #BSUB -W are read by this one parser: LSF's
// [HH:]MM first, then jobspec's forms, and never a limit of 0.
func TestParseLSFWalltime(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"30", 30 * time.Minute},
		{"1:30", 90 * time.Minute},
		{"10:00", 10 * time.Hour},
		{"1:30:00", 90 * time.Minute},
		{"2-00:00:00", 48 * time.Hour},
		{"2h", 2 * time.Hour},
		{"1d12h", 36 * time.Hour},
	}
	for _, tt := range tests {
		if got, err := ParseLSFWalltime(tt.in); err != nil || got != tt.want {
			t.Errorf("ParseLSFWalltime(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "0", "0:00", "abc", "1h-"} {
		if _, err := ParseLSFWalltime(bad); !errors.Is(err, ErrLSFWalltime) {
			t.Errorf("ParseLSFWalltime(%q): error %v, want ErrLSFWalltime", bad, err)
		}
	}
	if _, err := ParseLSFWalltime("1:60"); err == nil || err.Error() != "minutes 60 out of range in HH:MM" {
		t.Errorf("ParseLSFWalltime(1:60): %v", err)
	}
}
