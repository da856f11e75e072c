package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestLicenses runs jobs that ask for licenses through the real tools,
// as nobody: sbatch -L takes the two seats of a 2-seat license and a
// third job waits Licenses; scontrol show licenses shows the use and
// bqueue -o wide the jobs' licenses; bsub -R rusage[] naming a license the site lacks is
// refused with the known ones; when a holder is cancelled the waiting
// job starts.
func TestLicenses(t *testing.T) {
	needRunc(t)
	base := searchable(t)
	parts := filepath.Join(base, "partitions.hcl")
	if err := os.WriteFile(parts, []byte("partition \"batch\" {\n  nodes = [\"*\"]\n}\nlicense \"matlab\" {\n  count = 2\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 1, "4", "--partitions", parts)
	dir := dirOf(t, nobodyUser, 0o755, base, "submit")
	links := slurmLinks(t, filepath.Join(dir, ".troupe"))

	var ids []uint64
	for range 3 {
		ids = append(ids, c.sbatchID(t, nobodyUser, links, dir, "", "-L", "matlab:1", "-o", "/dev/null", "--wrap", "sleep 300"))
	}
	for _, id := range ids[:2] {
		c.waitState(id, 2*time.Minute, func(j api.Job) bool { return j.State == api.JobRunning })
	}
	j := c.waitState(ids[2], 30*time.Second, func(j api.Job) bool { return j.Reason == api.ReasonLicenses })
	if j.State != api.JobPending || j.Licenses["matlab"] != 1 {
		t.Fatalf("third job: %s (%s), licenses %v", j.State, j.Reason, j.Licenses)
	}

	out, errs, code := c.slurmAs(t, nobodyUser, links, dir, "", "scontrol", "-o", "show", "licenses")
	if want := "LicenseName=matlab Total=2 Used=2 Free=0 Reserved=0 Remote=no\n"; code != 0 || out != want {
		t.Errorf("scontrol show licenses: exit %d, %q (%s), want %q", code, out, errs, want)
	}
	out, errs, code = c.runAs(nobodyUser.uid, dir, "bqueue", "-o", "wide")
	if code != 0 || !strings.Contains(out, "LICENSES") || strings.Count(out, "matlab:1") != 3 || !strings.Contains(out, "Licenses") {
		t.Errorf("bqueue -o wide: exit %d:\n%s%s", code, out, errs)
	}
	out, errs, code = c.runAs(nobodyUser.uid, dir, "bsub", "-R", "rusage[fluent=1]", "true")
	if code == 0 || !strings.Contains(errs, `license "fluent" is not defined; known licenses: matlab (2)`) {
		t.Errorf("bsub -R rusage[fluent=1]: exit %d, %q %q", code, out, errs)
	}

	if _, errs, code := c.slurmAs(t, nobodyUser, links, dir, "", "scancel", strconv.FormatUint(ids[0], 10)); code != 0 {
		t.Fatalf("scancel: exit %d, %s", code, errs)
	}
	c.waitState(ids[2], 2*time.Minute, func(j api.Job) bool { return j.State == api.JobRunning })
	for _, id := range ids[1:] {
		if _, errs, code := c.slurmAs(t, nobodyUser, links, dir, "", "scancel", fmt.Sprint(id)); code != 0 {
			t.Errorf("scancel %d: exit %d, %s", id, code, errs)
		}
	}
}
