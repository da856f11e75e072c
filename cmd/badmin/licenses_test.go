package main

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

func TestLicenses(t *testing.T) {
	s := clitest.NewSchedd(t)
	lics := []api.License{{Name: "matlab", Total: 20, Used: 2, Free: 18, Waiting: 3}, {Name: "ansys", Total: 1, Used: 3, Free: 0}}
	s.Handle("GET /v1/partitions", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 7, api.PartitionList{Policy: "fairshare", Licenses: lics})
	})
	code, out, errs := runBadmin("--addr", s.Addr, "licenses")
	want := "LICENSE  TOTAL  USED  FREE  WAITING\nmatlab   20     2     18    3\nansys    1      3     0     0\n"
	if code != 0 || errs != "" || out != want {
		t.Fatalf("exit %d stderr %q stdout:\n%s\nwant:\n%s", code, errs, out, want)
	}
	code, out, _ = runBadmin("--addr", s.Addr, "licenses", "-o", "json")
	var got []api.License
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got) != 2 || got[0] != lics[0] {
		t.Fatalf("-o json: exit %d, %v, %s", code, err, out)
	}
}
