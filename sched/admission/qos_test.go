package admission_test

import (
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/sched/admission"
	"github.com/troupe-hpc/troupe/sched/partition"
)

// A job's QOS is the one it names, else its partition's default; an
// unknown QOS and a walltime past the QOS's max_wall are refused at
// submission.
func TestAdmitQOS(t *testing.T) {
	v := newView(t)
	cfg, diags := partition.Parse("partitions.hcl", []byte(strings.Replace(partitions, `partition "cpu" {`, `partition "cpu" {
  default_qos = "normal"`, 1)+`
qos "normal" {
  priority = 1
}
qos "short" {
  priority = 10
  max_wall = "10m"
}
`))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	v.cfg = cfg
	job := func(extra string) string {
		return "job \"q\" {\n  image   = \"host\"\n  command = [\"true\"]\n" + extra + "}\n"
	}
	j, err := admission.Admit(fromFile(t, job("")), v, admission.Settings{}, nil)
	if err != nil || j.QOS != "normal" {
		t.Fatalf("no qos asked: %q, %v; want the partition's default normal", j.QOS, err)
	}
	j, err = admission.Admit(fromFile(t, job("  qos = \"short\"\n  walltime = \"5m\"\n")), v, admission.Settings{}, nil)
	if err != nil || j.QOS != "short" {
		t.Fatalf("qos short: %q, %v", j.QOS, err)
	}
	r := refusal(t, firstErr(admission.Admit(fromFile(t, job("  qos = \"short\"\n  walltime = \"1h\"\n")), v, admission.Settings{}, nil)))
	if got := r.API(); len(got) != 1 || got[0].Path != "walltime" || !strings.Contains(got[0].Message, "exceeds qos short's limit of 10m") {
		t.Errorf("walltime past max_wall: %+v", got)
	}
	r = refusal(t, firstErr(admission.Admit(fromFile(t, job("  qos = \"gold\"\n")), v, admission.Settings{}, nil)))
	if got := r.API(); len(got) != 1 || got[0].Path != "qos" || !strings.Contains(got[0].Message, `qos "gold" is not defined`) {
		t.Errorf("unknown qos: %+v", got)
	}
}
