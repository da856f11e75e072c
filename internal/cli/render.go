package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"text/tabwriter"
)

// Table writes aligned columns: a header row, then rows, two spaces
// between columns. Empty cells show as "-"; tabs and newlines in cells
// become spaces so that one row stays one line.
type Table struct {
	tw *tabwriter.Writer
}

// NewTable starts a table on w with the given column names.
func NewTable(w io.Writer, header ...string) *Table {
	t := &Table{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	t.Row(header...)
	return t
}

// Row adds one row.
func (t *Table) Row(cells ...string) {
	var b strings.Builder
	for i, c := range cells {
		if i > 0 {
			b.WriteByte('\t')
		}
		b.WriteString(cell(c))
	}
	b.WriteByte('\n')
	io.WriteString(t.tw, b.String())
}

// Flush writes the table out.
func (t *Table) Flush() error { return t.tw.Flush() }

var cellReplacer = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ")

func cell(s string) string {
	if s == "" {
		return "-"
	}
	return cellReplacer.Replace(s)
}

// WriteJSON writes v as indented JSON (two spaces) and a newline. Field
// order follows the Go types and map keys are sorted, so the output is
// stable for the same value.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// JSONList writes a JSON list an element at a time, byte for byte as
// WriteJSON writes the whole list, so that a long list (bqueue -o json
// of every user's jobs) is printed as it comes without being held.
type JSONList struct {
	w   io.Writer
	n   int
	buf bytes.Buffer
	enc *json.Encoder
}

// NewJSONList starts a list on w; Close ends it.
func NewJSONList(w io.Writer) *JSONList {
	l := &JSONList{w: w}
	l.enc = json.NewEncoder(&l.buf)
	l.enc.SetIndent("  ", "  ") // an element of WriteJSON's list
	l.enc.SetEscapeHTML(false)
	return l
}

// Add writes v, the list's next element, in one Write.
func (l *JSONList) Add(v any) error {
	l.buf.Reset()
	if l.n == 0 {
		l.buf.WriteString("[\n  ")
	} else {
		l.buf.WriteString(",\n  ")
	}
	if err := l.enc.Encode(v); err != nil {
		return err
	}
	l.n++
	_, err := l.w.Write(bytes.TrimSuffix(l.buf.Bytes(), []byte("\n")))
	return err
}

// Close ends the list ("[]" when nothing was added) and its line.
func (l *JSONList) Close() error {
	end := "\n]\n"
	if l.n == 0 {
		end = "[]\n"
	}
	_, err := io.WriteString(l.w, end)
	return err
}
