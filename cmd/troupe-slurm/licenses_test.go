package main

import (
	"bytes"
	"maps"
	"net/http"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

func TestSbatchLicenses(t *testing.T) {
	inDir(t)
	writeFile(t, "job.sh", "#!/bin/sh\n#SBATCH -L ansys\necho hi\n")
	got, code, _, errs := sbatchRun(t, "", "-L", "matlab:2", "job.sh")
	if code != 0 || !maps.Equal(got.Spec.Licenses, map[string]int{"matlab": 2, "ansys": 1}) {
		t.Fatalf("exit %d (%s), licenses %v", code, errs, got.Spec.Licenses)
	}
	got, code, _, _ = sbatchRun(t, "", "--licenses=matlab:3", "job.sh")
	if code != 0 || got.Spec.Licenses["matlab"] != 3 {
		t.Fatalf("--licenses=: exit %d, licenses %v", code, got.Spec.Licenses)
	}
	if _, code, _, errs = sbatchRun(t, "", "-L", "matlab:0", "job.sh"); code == 0 {
		t.Errorf("-L matlab:0 taken (%s)", errs)
	}
}

func TestScontrolShowLicenses(t *testing.T) {
	s := clitest.NewSchedd(t)
	s.Handle("GET /v1/partitions", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 7, api.PartitionList{Licenses: []api.License{
			{Name: "matlab", Total: 20, Used: 2, Free: 18}, {Name: "ansys", Total: 1, Used: 1}}})
	})
	t.Setenv("TROUPE_ADDR", s.Addr)
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := dispatch(append([]string{"scontrol"}, args...), nil, &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errs := run("show", "licenses", "matlab"); code != 0 ||
		out != "LicenseName=matlab\n   Total=20 Used=2 Free=18 Reserved=0 Remote=no\n\n" {
		t.Errorf("show licenses matlab: exit %d %q %q", code, out, errs)
	}
	if code, out, _ := run("-o", "show", "lic"); code != 0 || out != "LicenseName=matlab Total=20 Used=2 Free=18 Reserved=0 Remote=no\nLicenseName=ansys Total=1 Used=1 Free=0 Reserved=0 Remote=no\n" {
		t.Errorf("-o show lic: exit %d %q", code, out)
	}
	if code, _, errs := run("show", "licenses", "fluent"); code != 1 || errs != "License fluent not found\n" {
		t.Errorf("unknown license: exit %d %q", code, errs)
	}
}
