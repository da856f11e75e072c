// Package config reads schedd.hcl, the controller's settings file
// (schedd --config). Each setting is one of schedd's flags, spelled with
// underscores (data_dir for --data-dir); flags given on the command line
// override the file. The development cluster's flags (--dev, --nodes, …)
// are command-line only.
//
// Errors carry the place: "schedd.hcl:4:1: Unsupported argument; An
// argument named "data_dri" is not expected here. Did you mean
// "data_dir"?".
//
// Of troupe it imports jobspec only; it must not import sched (the
// controller) or nodelet/....
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/troupe-hpc/troupe/jobspec"
)

// Kinds of settings: how the value is checked and given to the flag.
type kind int

const (
	kindString   kind = iota
	kindPath          // a file or directory; relative to the file's directory
	kindAddr          // host:port
	kindURL           // http(s)://host:port
	kindDuration      // a Go duration, "30s", "5m"
	kindBool
	kindPeers // a list of "id=host:port"
	kindSize  // bytes: a number, or a string with a unit ("64KiB")
	kindBytes // a limit in bytes as kindSize, or 0 (unlimited)
	kindCount // a whole number, 0 or more
	kindCap   // a cap: a whole number, 0 (the default) or -1 (none) or more
	kindAge   // a duration that may be in days: "5m", "365d"
	kindDriver
)

// Block is the block of schedd.hcl whose attributes are settings with
// its name as their key's prefix: accounting { keep = "365d" } is the
// setting "accounting.keep".
const Block = "accounting"

// Setting is one key of schedd.hcl and the flag it stands for.
type Setting struct {
	Key  string // in the file: "data_dir"
	Flag string // schedd's flag, without dashes: "data-dir"
	kind kind
}

// Settings are every key schedd.hcl takes, in the order of the example
// file (etc/schedd.hcl).
var Settings = []Setting{
	{"data_dir", "data-dir", kindPath},
	{"socket", "socket", kindPath},
	{"listen", "listen", kindAddr},
	{"tls_cert", "tls-cert", kindPath},
	{"tls_key", "tls-key", kindPath},
	{"insecure_tcp", "insecure-tcp", kindBool},
	{"join_token_file", "join-token-file", kindPath},
	{"admin_group", "admin-group", kindString},
	{"partitions", "partitions", kindPath},
	{"images", "images", kindPath},
	{"node_timeout", "node-timeout", kindDuration},
	{"raft_addr", "raft-addr", kindAddr},
	{"peer_ca", "peer-ca", kindPath},
	{"peers", "peers", kindPeers},
	{"id", "id", kindString},
	{"join", "join", kindURL},
	{"advertise", "advertise", kindURL},
	{"metrics_addr", "metrics-addr", kindAddr},
	{"web_addr", "web-addr", kindAddr},
	{"web_tls", "web-tls", kindBool},
	{"max_job_input", "max-job-input", kindSize},
	{"max_queued_per_user", "max-queued-per-user", kindCount},
	{"max_queued", "max-queued", kindCount},
	{"max_queued_input_per_user", "max-queued-input-per-user", kindBytes},
	{"max_streams_per_job", "max-streams-per-job", kindCap},
	{"max_streams_per_user", "max-streams-per-user", kindCap},
	{"max_streams", "max-streams", kindCount},
	{"fd_reserve", "fd-reserve", kindCount},
	{"keep_ended", "keep-ended", kindAge},
	{"accounting.driver", "accounting-driver", kindDriver},
	{"accounting.dsn", "accounting-dsn", kindString},
	{"accounting.keep", "accounting-keep", kindAge},
	{"verbose", "v", kindBool},
}

// File is a schedd.hcl read and checked.
type File struct {
	Path string
	// Flags are the file's settings as schedd's flags take them, by flag
	// name ("data-dir" → "/var/lib/troupe/schedd"); paths are absolute.
	Flags map[string]string
	// Ranges are where each setting is, by flag name, for errors found
	// later.
	Ranges map[string]hcl.Range
}

// Load reads and checks the file at path.
func Load(path string) (*File, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, diags := Parse(src, path)
	if diags.HasErrors() {
		return nil, errors.New(strings.TrimSpace(jobspec.FormatDiagnostics(diags)))
	}
	return f, nil
}

// Parse reads schedd.hcl from src; filename is used in diagnostics and
// relative paths are resolved from its directory.
func Parse(src []byte, filename string) (*File, hcl.Diagnostics) {
	hf, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	schema := &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: Block}}}
	inner := &hcl.BodySchema{}
	for _, s := range Settings {
		if name, ok := strings.CutPrefix(s.Key, Block+"."); ok {
			inner.Attributes = append(inner.Attributes, hcl.AttributeSchema{Name: name})
			continue
		}
		schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: s.Key})
	}
	content, d := hf.Body.Content(schema)
	diags = append(diags, d...)
	attrs := map[string]*hcl.Attribute{}
	if content != nil {
		for k, a := range content.Attributes {
			attrs[k] = a
		}
		for i, b := range content.Blocks {
			if i > 0 {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate block",
					Detail: "only one accounting block is allowed", Subject: &b.DefRange})
				continue
			}
			bc, d := b.Body.Content(inner)
			diags = append(diags, d...)
			for k, a := range bc.Attributes {
				attrs[Block+"."+k] = a
			}
		}
	}
	dir, err := filepath.Abs(filepath.Dir(filename))
	if err != nil {
		return nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: err.Error()})
	}
	f := &File{Path: filename, Flags: map[string]string{}, Ranges: map[string]hcl.Range{}}
	for _, s := range Settings {
		a, ok := attrs[s.Key]
		if !ok {
			continue
		}
		v, err := s.value(a, dir)
		if err != nil {
			diags = append(diags, err)
			continue
		}
		f.Flags[s.Flag] = v
		f.Ranges[s.Flag] = a.Range
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return f, diags
}

// value checks a and returns it as the flag takes it.
func (s Setting) value(a *hcl.Attribute, dir string) (string, *hcl.Diagnostic) {
	rng := a.Expr.Range()
	bad := func(summary, detail string, args ...any) (string, *hcl.Diagnostic) {
		return "", &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary,
			Detail: fmt.Sprintf(detail, args...), Subject: &rng}
	}
	raw, d := a.Expr.Value(nil)
	if d.HasErrors() {
		return "", d[0]
	}
	want := cty.String
	switch s.kind {
	case kindBool:
		want = cty.Bool
	case kindPeers:
		want = cty.List(cty.String)
	case kindCount, kindCap:
		want = cty.Number
	}
	v, err := convert.Convert(raw, want)
	if err != nil || v.IsNull() {
		what := map[kind]string{kindBool: "true or false", kindPeers: `a list of "id=host:port" strings`, kindCount: "a whole number", kindCap: "a whole number"}[s.kind]
		if what == "" {
			what = "a string"
		}
		return bad("Invalid value", "%s must be %s", s.Key, what)
	}
	switch s.kind {
	case kindBool:
		return strconv.FormatBool(v.True()), nil
	case kindCount:
		n, acc := v.AsBigFloat().Int64()
		if acc != 0 || n < 0 {
			return bad("Invalid value", "%s must be a whole number, 0 or more", s.Key)
		}
		return strconv.FormatInt(n, 10), nil
	case kindCap:
		n, acc := v.AsBigFloat().Int64()
		if acc != 0 || n < -1 {
			return bad("Invalid value", "%s must be a whole number: 0 (the default), -1 (unlimited) or more", s.Key)
		}
		return strconv.FormatInt(n, 10), nil
	case kindBytes:
		if v.AsString() == "0" {
			return "0", nil
		}
		n, err := jobspec.ParseMemory(v.AsString())
		if err != nil || n <= 0 {
			return bad("Invalid size", `%s %q: want a size such as "64MiB", a number of bytes, or 0 (unlimited)`, s.Key, v.AsString())
		}
		return strconv.FormatInt(n, 10), nil
	case kindSize:
		n, err := jobspec.ParseMemory(v.AsString())
		if err != nil || n <= 0 {
			return bad("Invalid size", `%s %q: want a positive size such as "64KiB" or a number of bytes`, s.Key, v.AsString())
		}
		return strconv.FormatInt(n, 10), nil
	case kindPeers:
		var peers []string
		for _, p := range v.AsValueSlice() {
			if p.IsNull() {
				return bad("Invalid peer", "peers: a peer is null")
			}
			id, addr, ok := strings.Cut(p.AsString(), "=")
			if _, _, err := net.SplitHostPort(addr); !ok || id == "" || err != nil {
				return bad("Invalid peer", `peers: %q is not "id=host:port"`, p.AsString())
			}
			peers = append(peers, p.AsString())
		}
		if len(peers) == 0 {
			return bad("Invalid peer", "peers is empty; leave it out for a lone server")
		}
		return strings.Join(peers, ","), nil
	}
	str := v.AsString()
	if str == "" {
		return bad("Empty value", "%s is empty; leave it out for schedd's default", s.Key)
	}
	switch s.kind {
	case kindPath:
		if !filepath.IsAbs(str) {
			str = filepath.Join(dir, str)
		}
	case kindAddr:
		if _, _, err := net.SplitHostPort(str); err != nil {
			return bad("Invalid address", "%s %q: want host:port, e.g. 127.0.0.1:8080", s.Key, str)
		}
	case kindURL:
		if !strings.HasPrefix(str, "https://") && !strings.HasPrefix(str, "http://") {
			return bad("Invalid address", "%s %q: want a URL, e.g. https://10.0.0.1:7946", s.Key, str)
		}
	case kindDuration:
		dur, err := time.ParseDuration(str)
		if err != nil || dur <= 0 {
			return bad("Invalid duration", "%s %q: want a positive duration such as 30s or 2m", s.Key, str)
		}
	case kindAge:
		if _, err := ParseAge(str); err != nil {
			return bad("Invalid duration", "%s %q: %v", s.Key, str, err)
		}
	case kindDriver:
		if str != "sqlite" && str != "postgres" {
			return bad("Invalid driver", "%s %q: want \"sqlite\" or \"postgres\"", s.Key, str)
		}
	}
	return str, nil
}

// Describe gives the place of the flag's setting, "schedd.hcl:3:1", or
// the file's name when the file does not set it.
func (f *File) Describe(flag string) string {
	if r, ok := f.Ranges[flag]; ok {
		return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
	}
	return f.Path
}

// ParseAge reads a positive age: a Go duration ("5m", "90s") or a whole
// number of days ("365d").
func ParseAge(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return 0, errors.New("want a positive duration such as 5m, 12h or 365d")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, errors.New("want a positive duration such as 5m, 12h or 365d")
	}
	return d, nil
}
