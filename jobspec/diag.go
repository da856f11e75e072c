package jobspec

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// WriteDiagnostics prints diags the way hcl tools do: each starts with
// "Error: " or "Warning: ", names "on FILE line N", and quotes the source
// line with the offending part underlined. path is the file's name as
// given to Parse and src its content (used for the snippets). No color,
// no wrapping.
func WriteDiagnostics(w io.Writer, path string, src []byte, diags hcl.Diagnostics) error {
	// The parsed body lets the writer name the enclosing block
	// ("in job "train""); a file that does not parse still gets snippets.
	file, _ := parseSource(path, src)
	if file == nil {
		file = &hcl.File{Bytes: src}
	}
	files := map[string]*hcl.File{path: file}
	return hcl.NewDiagnosticTextWriter(w, files, 0, false).WriteDiagnostics(diags)
}

// FormatDiagnostic writes d on one line, compiler style, for logs and
// tests: "file:line:col: summary; detail". Warnings read
// "file:line:col: warning: summary; detail". A diagnostic without a
// position has no "file:line:col: " prefix.
func FormatDiagnostic(d *hcl.Diagnostic) string {
	var b strings.Builder
	if d.Subject != nil {
		fmt.Fprintf(&b, "%s:%d:%d: ", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
	}
	if d.Severity == hcl.DiagWarning {
		b.WriteString("warning: ")
	}
	b.WriteString(d.Summary)
	if d.Detail != "" {
		b.WriteString("; ")
		b.WriteString(strings.Join(strings.Fields(d.Detail), " "))
	}
	return b.String()
}

// FormatDiagnostics is FormatDiagnostic for each of diags, one a line.
func FormatDiagnostics(diags hcl.Diagnostics) string {
	var b strings.Builder
	for _, d := range diags {
		b.WriteString(FormatDiagnostic(d))
		b.WriteByte('\n')
	}
	return b.String()
}

// errorAt makes an error diagnostic whose subject is rng (nil: none).
func errorAt(rng *hcl.Range, summary, detail string, args ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(detail, args...),
		Subject:  rng,
	}
}

// warningAt makes a warning diagnostic whose subject is rng.
func warningAt(rng *hcl.Range, summary, detail string, args ...any) *hcl.Diagnostic {
	d := errorAt(rng, summary, detail, args...)
	d.Severity = hcl.DiagWarning
	return d
}

// tidy drops repeated diagnostics (same position and summary) and puts
// the rest in source order, those without a position first.
func tidy(diags hcl.Diagnostics) hcl.Diagnostics {
	type key struct {
		file    string
		byte    int
		summary string
	}
	seen := map[key]bool{}
	out := diags[:0:0]
	for _, d := range diags {
		k := key{summary: d.Summary + "\x00" + d.Detail}
		if d.Subject != nil {
			k.file, k.byte = d.Subject.Filename, d.Subject.Start.Byte
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, d)
	}
	slices.SortStableFunc(out, func(a, b *hcl.Diagnostic) int {
		if a.Subject == nil || b.Subject == nil {
			switch {
			case a.Subject == nil && b.Subject == nil:
				return 0
			case a.Subject == nil:
				return -1
			}
			return 1
		}
		return cmp.Or(
			cmp.Compare(a.Subject.Filename, b.Subject.Filename),
			cmp.Compare(a.Subject.Start.Byte, b.Subject.Start.Byte),
		)
	})
	return out
}
