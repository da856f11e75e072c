package sched

import (
	"encoding/json"
	"net/url"
	"strings"
)

type jsonRaw string

func (r jsonRaw) MarshalJSON() ([]byte, error) { return json.RawMessage(r), nil }

func query(path string) url.Values {
	i := strings.Index(path, "?")
	if i < 0 {
		return nil
	}
	q, _ := url.ParseQuery(path[i+1:])
	return q
}
