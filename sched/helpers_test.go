package sched

import (
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"strings"

	"github.com/troupe-hpc/troupe/internal/client"
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

func writeFile(t interface {
	Helper()
	Fatal(...any)
}, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func asAPI(err error, ae **client.APIError) bool { return errors.As(err, ae) }
