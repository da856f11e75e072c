package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const snakefile = `rule all:
    input: "out/upper.txt", "out/count.txt"

rule hello:
    output: "out/hello.txt"
    threads: 1
    shell: "echo hello from troupe > {output}"

rule upper:
    input: "out/hello.txt"
    output: "out/upper.txt"
    threads: 2
    shell: "tr a-z A-Z < {input} > {output}"

rule count:
    input: "out/hello.txt"
    output: "out/count.txt"
    threads: 1
    shell: "wc -w < {input} > {output}"
`

// TestSnakemakeLSF runs Debian's snakemake, unmodified, as nobody, through
// LSF's bsub: --cluster "bsub -n {threads} -W 5 -o logs/%J.out". Each rule
// is a script job (snakemake's jobscript, #!/bin/sh) that runs as nobody in
// the workflow's directory on the host image; snakemake learns each job's
// end from the files the jobscript leaves there. Every output is checked.
func TestSnakemakeLSF(t *testing.T) {
	needRunc(t)
	snakemake, err := exec.LookPath("snakemake")
	if err != nil {
		t.Skip("SKIP: snakemake is not installed (apt-get install snakemake; contrib/dev/install-deps does)")
	}
	c := startCluster(t, 1, "2")
	base := searchable(t)
	dir := dirOf(t, nobodyUser, 0o755, base, "workflow")
	logs := dirOf(t, nobodyUser, 0o755, dir, "logs") // bsub -o does not create directories
	if err := os.WriteFile(filepath.Join(dir, "Snakefile"), []byte(snakefile), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := c.toolAsNobody(t, 5*time.Minute, dir, "", snakemake, "--cluster", "bsub -n {threads} -W 5 -o logs/%J.out",
		"--jobs", "2", "--latency-wait", "30", "--cores", "2", "--directory", dir)
	if err != nil {
		jobLogs, _ := filepath.Glob(filepath.Join(logs, "*"))
		var b strings.Builder
		for _, l := range jobLogs {
			s, _ := os.ReadFile(l)
			b.WriteString("== " + l + "\n" + string(s))
		}
		t.Fatalf("snakemake: %v\n%s\njob logs:\n%s", err, out, b.String())
	}
	for file, want := range map[string]string{
		"out/hello.txt": "hello from troupe\n",
		"out/upper.txt": "HELLO FROM TROUPE\n",
		"out/count.txt": "3\n",
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q\nsnakemake:\n%s", file, b, err, want, out)
		}
	}
	// Three jobs, each with its LSF-style log.
	if jobLogs, _ := filepath.Glob(filepath.Join(logs, "*.out")); len(jobLogs) != 3 {
		t.Errorf("logs/: %q, want 3 job logs", jobLogs)
	}
	bjobs, _, _ := c.run(dir, "bjobs", "-a", "-u", "nobody", "-noheader", "-o", "jobid stat")
	if strings.Count(bjobs, "DONE") != 3 {
		t.Errorf("bjobs -a: %q, want 3 DONE", bjobs)
	}
}
