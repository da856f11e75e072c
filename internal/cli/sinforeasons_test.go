package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// sinfo -R lists the nodes out of service, one line per reason, who set
// it and when: an admin's drain, a failing health check's, a DOWN node's
// "Not responding"; nodes in service are left out.
func TestSinfoReasons(t *testing.T) {
	at := time.Date(2026, 11, 29, 3, 0, 0, 0, time.Local)
	nhc := "ERROR: nhc: Health check failed: check_fs_mount: /scratch not mounted"
	nodes := []api.Node{
		{Name: "n4", State: api.NodeUp, Drain: true, DrainedBy: "healthcheck", DrainedAt: at, Reason: nhc, Health: nhc},
		{Name: "n1", State: api.NodeUp},
		{Name: "n2", State: api.NodeUp, Drain: true, DrainedBy: "root", DrainedAt: at, Reason: "DIMM swap"},
		{Name: "n3", State: api.NodeUp, Drain: true, DrainedBy: "healthcheck", DrainedAt: at, Reason: nhc, Health: nhc},
		{Name: "n5", State: api.NodeDown, LastHeartbeat: at},
	}
	var b strings.Builder
	if err := WriteSinfo(&b, SinfoReasonRows(nodes), SinfoReasonFormat, true); err != nil {
		t.Fatal(err)
	}
	want := "REASON               USER      TIMESTAMP           NODELIST\n" +
		"DIMM swap            root      2026-11-29T03:00:00 n2\n" +
		"ERROR: nhc: Health c healthche 2026-11-29T03:00:00 n[3-4]\n" +
		"Not responding       slurm     2026-11-29T03:00:00 n5\n"
	if b.String() != want {
		t.Fatalf("sinfo -R:\n%s\nwant:\n%s", b.String(), want)
	}
}
