package httpapi

import (
	"net/url"
	"slices"
	"testing"
)

func TestHistoryQuery(t *testing.T) {
	q, err := parseHistoryQuery(url.Values{"user": {"a", "b"}, "limit": {"5"}, "ended_from": {"2026-11-22T10:00:00Z"}})
	if err != nil || !slices.Equal(q.Users, []string{"a", "b"}) || q.Limit != 5 || q.EndedFrom.IsZero() {
		t.Errorf("%+v %v", q, err)
	}
	for _, bad := range []url.Values{{"limit": {"x"}}, {"limit": {"-1"}}, {"submitted_to": {"yesterday"}}} {
		if _, err := parseHistoryQuery(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
