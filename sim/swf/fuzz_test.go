package swf

import (
	"bytes"
	"compress/gzip"
	"testing"
)

// FuzzRead: any input parses or is refused with an error naming the line
// (or the gzip stream); no panic, no hang.
func FuzzRead(f *testing.F) {
	good := "; Version: 2.2\n; MaxProcs: 128\n1 0 10 3600 4 -1 -1 4 7200 -1 1 3 2 -1 1 1 -1 -1\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(good))
	_ = zw.Close()
	for _, s := range []string{good, "1 2 3\n", "; MaxNodes: x\n", "1 0 10 NaN 4 -1 -1 4 7200 -1 1 3 2 -1 1 1 -1 -1\n",
		"1 0 10 1e400 4 -1 -1 4 7200 -1 1 3 2 -1 1 1 -1 -1\n", "\x1f\x8b", gz.String(), gz.String()[:gz.Len()/2], ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := Read(bytes.NewReader(b))
		if err != nil {
			if l != nil || err.Error() == "" {
				t.Fatalf("error %q with log %v", err, l != nil)
			}
			return
		}
		for _, j := range l.Jobs {
			_ = j.ID
		}
	})
}
