package api

import (
	"testing"
	"time"
)

// OnClock moves a node's times onto the receiver's clock by the gap
// between the two at sending, and never past the arrival.
func TestContainerReportOnClock(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	node := now.Add(-time.Hour) // the node's clock is an hour behind
	r := ContainerReport{Sent: node, Updates: []ContainerUpdate{
		{At: node.Add(-3 * time.Second)}, {}, {At: node.Add(time.Minute)},
	}}
	r.OnClock(now)
	if !r.Updates[0].At.Equal(now.Add(-3*time.Second)) || !r.Updates[1].At.IsZero() || !r.Updates[2].At.Equal(now) || !r.Sent.IsZero() {
		t.Errorf("on schedd's clock: %+v", r)
	}
	old := ContainerReport{Updates: []ContainerUpdate{{At: now.Add(-time.Second)}, {At: now.Add(time.Hour)}}} // no Sent
	old.OnClock(now)
	if !old.Updates[0].At.Equal(now.Add(-time.Second)) || !old.Updates[1].At.Equal(now) {
		t.Errorf("without Sent: %+v", old)
	}
}
