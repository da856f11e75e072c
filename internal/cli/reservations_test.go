package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

func TestReservationFormats(t *testing.T) {
	loc := time.Local
	time.Local = time.UTC
	defer func() { time.Local = loc }()
	start := time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC)
	rs := []api.Reservation{
		{Name: "pm", State: api.ResvActive, Start: start, End: start.Add(4 * time.Hour), Duration: 4 * time.Hour,
			Nodes: []string{"node01", "node02"}, Flags: []string{api.FlagMaint, api.FlagWeekly}, Jobs: []uint64{7}},
		{Name: "course", State: api.ResvInactive, Start: start.Add(26 * time.Hour), End: start.Add(30 * time.Hour), Duration: 4 * time.Hour,
			Nodes: []string{"gpu01"}, Users: []string{"ann", "bob"}, Accounts: []string{"teach"}, Partition: "gpu"},
	}
	var b bytes.Buffer
	if err := WriteReservationsSlurm(&b, rs, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ReservationName=pm StartTime=2026-12-06T06:00:00 EndTime=2026-12-06T10:00:00 Duration=04:00:00\n   Nodes=node[01-02] NodeCnt=2",
		"Flags=MAINT,WEEKLY,SPEC_NODES", "PartitionName=gpu Flags=(null)", "Users=ann,bob Groups=(null) Accounts=teach Licenses=(null) State=INACTIVE",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("scontrol show reservation lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	_ = WriteReservationsSlurm(&b, rs[:1], true)
	if strings.Count(b.String(), "\n") != 1 {
		t.Errorf("-o: %q", b.String())
	}
	b.Reset()
	_ = WriteSinfoReservations(&b, rs, true)
	if want := "pm              ACTIVE 2026-12-06T06:00:00 2026-12-06T10:00:00    04:00:00  node[01-02]\n"; !strings.Contains(b.String(), want) || !strings.HasPrefix(b.String(), "RESV_NAME") {
		t.Errorf("sinfo -T:\n%s\nwant the line %q", b.String(), want)
	}
	b.Reset()
	nodes := []api.Node{{Name: "node01", Capacity: api.Resources{CPUMilli: 32000}}, {Name: "node02", Capacity: api.Resources{CPUMilli: 32000}},
		{Name: "gpu01", Capacity: api.Resources{CPUMilli: 16000}}}
	jobs := []api.Job{{ID: 7, State: api.JobRunning, Containers: []api.Container{{Node: "node02"}}}}
	jobs[0].Containers[0].Resources.CPU = 2
	_ = WriteBrsvs(&b, rs, nodes, jobs)
	for _, want := range []string{
		"RSVID                TYPE   USER             NCPUS     RSV_HOSTS                TIME_WINDOW\n",
		"pm                   sys    system           2/64      node01:0/32              0:6:0-0:10:0\n",
		"                                                       node02:2/32              \n",
		"course               user   ann,bob          0/16      gpu01:0/16               12/7/8/0-12/7/12/0\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("brsvs lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	_ = WriteBrsvs(&b, nil, nil, nil)
	if b.String() != "No reservation found\n" {
		t.Errorf("brsvs without any: %q", b.String())
	}
}
