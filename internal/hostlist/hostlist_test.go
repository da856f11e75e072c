package hostlist

import (
	"reflect"
	"testing"
)

func TestCompressExpand(t *testing.T) {
	for _, c := range []struct {
		hosts []string
		list  string
	}{
		{[]string{"main1"}, "main1"},
		{[]string{"main1", "sub1", "sub2", "sub3"}, "main1,sub[1-3]"},
		{[]string{"node03", "node01", "node02", "node07", "node01"}, "node[01-03,07]"},
		{[]string{"node9", "gpu1", "login", "node10"}, "gpu1,login,node[9-10]"},
		{[]string{"sub10", "main1", "sub9", "sub1", "sub2"}, "main1,sub[1-2,9-10]"},
		{[]string{"n099", "n100", "n98"}, "n[98,100],n099"},
		{nil, ""},
	} {
		if got := Compress(c.hosts); got != c.list {
			t.Errorf("Compress(%q) = %q, want %q", c.hosts, got, c.list)
		}
	}
	got, err := Expand("main1,sub[1-3,9-10],node[08-10,12]")
	want := []string{"main1", "sub1", "sub2", "sub3", "sub9", "sub10", "node08", "node09", "node10", "node12"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Expand: %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{"node[1-", "node[3-1]", "node[a]"} {
		if _, err := Expand(bad); err == nil {
			t.Errorf("Expand(%q): no error", bad)
		}
	}
}
