package promtext

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// parse reads text with Prometheus' own parser, strict about names.
func parse(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("Prometheus' parser: %v\n%s", err, text)
	}
	return mfs
}

func labels(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// TestWriterEscapes: label values with quotes, backslashes and newlines,
// and HELP text with backslashes and newlines, are written escaped as
// the format asks and read back the same by Prometheus' parser; invalid
// UTF-8 is replaced, not written.
func TestWriterEscapes(t *testing.T) {
	tricky := "a \"quoted\" C:\\path\nand a second line"
	var w Writer
	w.Family("x_info", GaugeType, "Help with a \\ backslash,\na newline and \"quotes\".")
	w.Sample(1, Label{"name", tricky}, Label{"plain", "é ok"})
	w.Sample(2, Label{"name", ""}, Label{"plain", "}"})
	w.Sample(3, Label{"name", "bad \xff byte"}, Label{"plain", ""})
	if err := w.Err(); err != nil {
		t.Fatal(err)
	}
	text := string(w.Bytes())
	for _, want := range []string{
		`# HELP x_info Help with a \\ backslash,\na newline and "quotes".` + "\n",
		`x_info{name="a \"quoted\" C:\\path\nand a second line",plain="é ok"} 1` + "\n",
		`x_info{name="",plain="}"} 2` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	mf := parse(t, text)["x_info"]
	if mf == nil || len(mf.Metric) != 3 {
		t.Fatalf("parsed %v", mf)
	}
	if got := mf.GetHelp(); got != "Help with a \\ backslash,\na newline and \"quotes\"." {
		t.Errorf("help read back as %q", got)
	}
	if got := labels(mf.Metric[0])["name"]; got != tricky {
		t.Errorf("label read back as %q, want %q", got, tricky)
	}
	if got := labels(mf.Metric[1])["plain"]; got != "}" {
		t.Errorf("label read back as %q", got)
	}
	if got := labels(mf.Metric[2])["name"]; got != "bad \uFFFD byte" {
		t.Errorf("invalid UTF-8 read back as %q", got)
	}
}

// TestWriterTypesAndValues: counters, gauges and a summary read back
// with their types and values, the special floats included.
func TestWriterTypesAndValues(t *testing.T) {
	var w Writer
	w.Counter("c_total", "A counter.", 1<<40)
	w.Gauge("g", "A gauge.", -0.25)
	w.Family("s_seconds", SummaryType, "A summary.")
	w.Sample(0.5, Label{"quantile", "0.5"})
	w.Sample(math.Inf(1), Label{"quantile", "1"})
	w.SuffixSample("_sum", 3)
	w.SuffixSample("_count", 7)
	w.Gauge("n", "Not a number.", math.NaN())
	w.Gauge("big", "Large.", 1.073741824e+09)
	if err := w.Err(); err != nil {
		t.Fatal(err)
	}
	text := string(w.Bytes())
	if !strings.Contains(text, "big 1.073741824e+09\n") || !strings.Contains(text, "c_total 1.099511627776e+12\n") {
		t.Errorf("values not in Go's shortest form:\n%s", text)
	}
	mfs := parse(t, text)
	if mf := mfs["c_total"]; mf.GetType() != dto.MetricType_COUNTER || mf.Metric[0].GetCounter().GetValue() != 1<<40 {
		t.Errorf("c_total: %v", mf)
	}
	if mf := mfs["g"]; mf.GetType() != dto.MetricType_GAUGE || mf.Metric[0].GetGauge().GetValue() != -0.25 {
		t.Errorf("g: %v", mf)
	}
	s := mfs["s_seconds"]
	if s.GetType() != dto.MetricType_SUMMARY || len(s.Metric) != 1 {
		t.Fatalf("s_seconds: %v", s)
	}
	sum := s.Metric[0].GetSummary()
	if sum.GetSampleSum() != 3 || sum.GetSampleCount() != 7 || len(sum.Quantile) != 2 || !math.IsInf(sum.Quantile[1].GetValue(), 1) {
		t.Errorf("s_seconds: %v", sum)
	}
	if v := mfs["n"].Metric[0].GetGauge().GetValue(); !math.IsNaN(v) {
		t.Errorf("n = %v, want NaN", v)
	}
}

// TestWriterRefuses: what the format cannot carry is an error, not a
// broken exposition, and the handler answers it with a 500.
func TestWriterRefuses(t *testing.T) {
	for name, write := range map[string]func(*Writer){
		"bad metric name":   func(w *Writer) { w.Gauge("1x", "", 0) },
		"dash in name":      func(w *Writer) { w.Gauge("a-b", "", 0) },
		"bad label name":    func(w *Writer) { w.Family("x", GaugeType, ""); w.Sample(0, Label{"a.b", ""}) },
		"reserved label":    func(w *Writer) { w.Family("x", GaugeType, ""); w.Sample(0, Label{"__name__", "y"}) },
		"family twice":      func(w *Writer) { w.Gauge("x", "", 0); w.Gauge("x", "", 1) },
		"sample first":      func(w *Writer) { w.Sample(0) },
		"unknown type":      func(w *Writer) { w.Family("x", Type("histogram"), "") },
		"empty metric name": func(w *Writer) { w.Gauge("", "", 0) },
	} {
		t.Run(name, func(t *testing.T) {
			var w Writer
			write(&w)
			if w.Err() == nil {
				t.Fatalf("no error; wrote %q", w.Bytes())
			}
			rec := httptest.NewRecorder()
			Handler(write).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), w.Err().Error()) {
				t.Errorf("handler answered %d %q", rec.Code, rec.Body.String())
			}
		})
	}
}

// TestHandler serves the format's content type and what the function
// writes at each request.
func TestHandler(t *testing.T) {
	var c Counter
	srv := httptest.NewServer(Handler(func(w *Writer) { w.Counter("hits_total", "Requests.", c.Value()) }))
	defer srv.Close()
	for i := 1; i <= 2; i++ {
		c.Inc()
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
			t.Errorf("Content-Type = %q", ct)
		}
		if got := expfmt.ResponseFormat(resp.Header); got.FormatType() != expfmt.TypeTextPlain {
			t.Errorf("Prometheus reads the response as %v", got)
		}
		if want := "hits_total " + string(rune('0'+i)) + "\n"; !strings.HasSuffix(string(b), want) {
			t.Errorf("request %d: %q, want it to end with %q", i, b, want)
		}
	}
}

// TestCounterGaugeConcurrent: counters and gauges lose no update under
// concurrent use (run with -race to check the rest).
func TestCounterGaugeConcurrent(t *testing.T) {
	var c Counter
	var g Gauge
	const workers, n = 8, 1000
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range n {
				c.Inc()
				g.Inc()
				g.Add(0.5)
				g.Dec()
			}
		})
	}
	wg.Wait()
	if c.Value() != workers*n {
		t.Errorf("counter = %v, want %d", c.Value(), workers*n)
	}
	if g.Value() != workers*n*0.5 {
		t.Errorf("gauge = %v, want %v", g.Value(), workers*n*0.5)
	}
	g.Set(-3)
	if g.Value() != -3 {
		t.Errorf("gauge after Set(-3) = %v", g.Value())
	}
}
