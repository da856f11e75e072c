// Package promtext writes Prometheus' text exposition format (version
// 0.0.4) by hand, for daemons that export a few metrics and should not
// link Prometheus' client library: the nodelet, whose binary is
// re-executed as every container's init and would run that library's
// package initialisers (its default registry, procfs, expvar) at each
// start.
//
// A Writer writes metric families, each a HELP and a TYPE line and then
// its samples; Counter and Gauge are values safe for concurrent use;
// WriteGo and WriteProcess write the go_* and process_* series Prometheus
// users know from the Go client's collectors. Handler serves what a
// function writes at scrape time.
//
// It imports no troupe package.
package promtext

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// ContentType is the exposition format's media type.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Type is a metric family's type, as its TYPE line says.
type Type string

// The types this package writes.
const (
	CounterType Type = "counter"
	GaugeType   Type = "gauge"
	SummaryType Type = "summary"
)

// Label is one label of a sample.
type Label struct{ Name, Value string }

// Writer writes one exposition. Its first error (a bad metric or label
// name, a family written twice, a sample outside a family) sticks and is
// returned by Err; what follows it is not written.
type Writer struct {
	buf    bytes.Buffer
	family string
	seen   map[string]bool
	err    error
}

// Family starts the family name: its HELP and TYPE lines. A family's
// samples follow before the next family starts.
func (w *Writer) Family(name string, typ Type, help string) {
	if w.err != nil {
		return
	}
	if !validMetricName(name) {
		w.err = fmt.Errorf("metric name %q is not valid in the text format", name)
		return
	}
	switch typ {
	case CounterType, GaugeType, SummaryType:
	default:
		w.err = fmt.Errorf("metric %s: unknown type %q", name, typ)
		return
	}
	if w.seen == nil {
		w.seen = map[string]bool{}
	}
	if w.seen[name] {
		w.err = fmt.Errorf("metric %s written twice", name)
		return
	}
	w.seen[name] = true
	w.family = name
	w.buf.WriteString("# HELP ")
	w.buf.WriteString(name)
	w.buf.WriteByte(' ')
	escape(&w.buf, help, false)
	w.buf.WriteString("\n# TYPE ")
	w.buf.WriteString(name)
	w.buf.WriteByte(' ')
	w.buf.WriteString(string(typ))
	w.buf.WriteByte('\n')
}

// Sample writes a sample of the current family.
func (w *Writer) Sample(v float64, labels ...Label) {
	w.SuffixSample("", v, labels...)
}

// SuffixSample writes a sample named the current family's name with
// suffix appended, as a summary's _sum and _count.
func (w *Writer) SuffixSample(suffix string, v float64, labels ...Label) {
	if w.err != nil {
		return
	}
	if w.family == "" {
		w.err = fmt.Errorf("a sample (value %v) before any family", v)
		return
	}
	name := w.family + suffix
	if !validMetricName(name) {
		w.err = fmt.Errorf("metric name %q is not valid in the text format", name)
		return
	}
	w.buf.WriteString(name)
	if len(labels) > 0 {
		w.buf.WriteByte('{')
		for i, l := range labels {
			if !validLabelName(l.Name) {
				w.err = fmt.Errorf("metric %s: label name %q is not valid", name, l.Name)
				return
			}
			if i > 0 {
				w.buf.WriteByte(',')
			}
			w.buf.WriteString(l.Name)
			w.buf.WriteString(`="`)
			escape(&w.buf, l.Value, true)
			w.buf.WriteByte('"')
		}
		w.buf.WriteByte('}')
	}
	w.buf.WriteByte(' ')
	w.buf.WriteString(formatValue(v))
	w.buf.WriteByte('\n')
}

// Gauge writes a family of one unlabelled gauge sample.
func (w *Writer) Gauge(name, help string, v float64) {
	w.Family(name, GaugeType, help)
	w.Sample(v)
}

// Counter writes a family of one unlabelled counter sample.
func (w *Writer) Counter(name, help string, v float64) {
	w.Family(name, CounterType, help)
	w.Sample(v)
}

// Err is the writer's first error.
func (w *Writer) Err() error { return w.err }

// Bytes is what was written so far.
func (w *Writer) Bytes() []byte { return w.buf.Bytes() }

// Handler serves what write writes, anew at each request, with the
// format's content type; a write that fails gets a 500 naming the error.
func Handler(write func(*Writer)) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var w Writer
		write(&w)
		if err := w.Err(); err != nil {
			http.Error(rw, "writing metrics: "+err.Error(), http.StatusInternalServerError)
			return
		}
		rw.Header().Set("Content-Type", ContentType)
		rw.Header().Set("Content-Length", strconv.Itoa(w.buf.Len()))
		if r.Method == http.MethodHead {
			return
		}
		_, _ = rw.Write(w.Bytes())
	})
}

// escape writes s escaped as the format asks: a backslash and a newline
// in HELP text, and a double quote too in a label value. The format is
// UTF-8: invalid bytes (a device name, say) become U+FFFD rather than
// make the exposition unreadable.
func escape(b *bytes.Buffer, s string, quote bool) {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if !strings.ContainsAny(s, "\\\n\"") {
		b.WriteString(s)
		return
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '"' && quote:
			b.WriteString(`\"`)
		default:
			b.WriteByte(c)
		}
	}
}

// formatValue writes v as Go's shortest representation that reads back
// the same, with the format's spellings of the infinities and NaN.
func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// validMetricName: [a-zA-Z_:][a-zA-Z0-9_:]*.
func validMetricName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != ""
}

// validLabelName: [a-zA-Z_][a-zA-Z0-9_]*, and not the reserved __ prefix.
func validLabelName(s string) bool {
	if strings.HasPrefix(s, "__") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != ""
}
