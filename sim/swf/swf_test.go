package swf

import (
	"bytes"
	"compress/gzip"
	"errors"
	"strings"
	"testing"
)

const sample = `; Version: 2.2
; MaxProcs: 100
; MaxNodes: 100
1 0 10 100 4 -1 -1 4 200 -1 1 7 1 -1 1 -1 -1 -1
2 5 -1 0 -1 -1 -1 8 -1 -1 1 8 1 -1 1 -1 -1 -1
`

func TestRead(t *testing.T) {
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write([]byte(sample))
	w.Close()
	for name, in := range map[string][]byte{"plain": []byte(sample), "gzip": gz.Bytes()} {
		t.Run(name, func(t *testing.T) {
			l, err := Read(bytes.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			if l.Header.MaxProcs != 100 || len(l.Jobs) != 2 {
				t.Fatalf("header %+v, %d jobs", l.Header, len(l.Jobs))
			}
			j := l.Jobs[1]
			if j.ID != 2 || j.Submit != 5 || j.Run != 0 || j.Procs != -1 || j.ReqProcs != 8 || j.User != 8 {
				t.Fatalf("job 2 = %+v", j)
			}
		})
	}
}

func TestReadBad(t *testing.T) {
	_, err := Read(strings.NewReader("1 2 3\n"))
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("err = %v, want ErrFormat at line 1", err)
	}
}
