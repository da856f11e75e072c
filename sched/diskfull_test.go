package sched

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/sched/raftlog"
)

// A full data dir is answered 507 with the reason, not 503 "not the
// leader" (which clients retry for their whole budget).
func TestDiskFullIs507(t *testing.T) {
	w := httptest.NewRecorder()
	writeErr(w, fmt.Errorf("%w: /var/lib/troupe/schedd/raft: no space left on device", raftlog.ErrDiskFull))
	if w.Code != http.StatusInsufficientStorage || !strings.Contains(w.Body.String(), "schedd data dir full") {
		t.Fatalf("%d %s", w.Code, w.Body.String())
	}
}
