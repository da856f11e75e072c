package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	src := `
data_dir     = "/var/lib/troupe/schedd"
partitions   = "partitions.hcl"    # relative to the file
node_timeout = "45s"
insecure_tcp = true
peers        = ["s1=10.0.0.1:7950", "s2=10.0.0.2:7950"]
web_addr     = "127.0.0.1:8080"
verbose      = false
max_job_input       = "32KiB"
max_queued_per_user = 500
max_queued          = 200000
max_queued_input_per_user = "128MiB"
`
	f, diags := Parse([]byte(src), "/etc/troupe/schedd.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want := map[string]string{
		"data-dir": "/var/lib/troupe/schedd", "partitions": "/etc/troupe/partitions.hcl", "node-timeout": "45s",
		"insecure-tcp": "true", "peers": "s1=10.0.0.1:7950,s2=10.0.0.2:7950", "web-addr": "127.0.0.1:8080", "v": "false",
		"max-job-input": "32768", "max-queued-per-user": "500", "max-queued": "200000",
		"max-queued-input-per-user": "134217728",
	}
	for k, v := range want {
		if f.Flags[k] != v {
			t.Errorf("--%s = %q, want %q", k, f.Flags[k], v)
		}
	}
	if len(f.Flags) != len(want) {
		t.Errorf("flags = %v", f.Flags)
	}
	if got := f.Describe("node-timeout"); got != "/etc/troupe/schedd.hcl:4:1" {
		t.Errorf("Describe = %q", got)
	}
}

// TestParseAccounting: keep_ended and the accounting block become
// schedd's --keep-ended and --accounting-* flags; days are allowed.
func TestParseAccounting(t *testing.T) {
	src := "keep_ended = \"10m\"\naccounting {\n  driver = \"sqlite\"\n  keep = \"365d\"\n}\n"
	f, diags := Parse([]byte(src), "/etc/troupe/schedd.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if f.Flags["keep-ended"] != "10m" || f.Flags["accounting-driver"] != "sqlite" || f.Flags["accounting-keep"] != "365d" {
		t.Fatalf("flags %v", f.Flags)
	}
	if got := f.Describe("accounting-keep"); got != "/etc/troupe/schedd.hcl:4:3" {
		t.Errorf("Describe = %q", got)
	}
	if d, err := ParseAge("365d"); err != nil || d != 365*24*time.Hour {
		t.Errorf("ParseAge(365d) = %v, %v", d, err)
	}
	for _, bad := range []string{"0d", "d", "-5m", "1.5d", ""} {
		if _, err := ParseAge(bad); err == nil {
			t.Errorf("ParseAge(%q) accepted", bad)
		}
	}
}

// A broken file names the place (file:line:col) and the key.
func TestParseErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"UnknownKey", "socket = \"/s\"\ndata_dri = \"/x\"\n", `schedd.hcl:2:1: Unsupported argument; An argument named "data_dri" is not expected here. Did you mean "data_dir"?`},
		{"DevFlag", "nodes = 2\n", `schedd.hcl:1:1: Unsupported argument; An argument named "nodes"`},
		{"Block", "partition \"x\" {\n}\n", `schedd.hcl:1:1: Unsupported block type`},
		{"Duration", "node_timeout = \"5 minutes\"\n", `schedd.hcl:1:16: Invalid duration; node_timeout "5 minutes": want a positive duration such as 30s or 2m`},
		{"Bool", "insecure_tcp = \"maybe\"\n", `schedd.hcl:1:16: Invalid value; insecure_tcp must be true or false`},
		{"Address", "web_addr = \"8080\"\n", `schedd.hcl:1:12: Invalid address; web_addr "8080": want host:port`},
		{"URL", "join = \"10.0.0.1:7946\"\n", `schedd.hcl:1:8: Invalid address; join "10.0.0.1:7946": want a URL`},
		{"Peer", "peers = [\"s1=10.0.0.1:7950\", \"s2\"]\n", `schedd.hcl:1:9: Invalid peer; peers: "s2" is not "id=host:port"`},
		{"Empty", "socket = \"\"\n", `schedd.hcl:1:10: Empty value; socket is empty`},
		{"Syntax", "data_dir = \n", `schedd.hcl:1:12: Invalid expression`},
		{"Variable", "data_dir = var.x\n", `schedd.hcl:1:12: Variables not allowed`},
		{"Size", "max_job_input = \"lots\"\n", `schedd.hcl:1:17: Invalid size; max_job_input "lots": want a positive size such as "64KiB"`},
		{"Count", "max_queued_per_user = -3\n", `schedd.hcl:1:23: Invalid value; max_queued_per_user must be a whole number, 0 or more`},
		{"KeepEnded", "keep_ended = \"soon\"\n", `schedd.hcl:1:14: Invalid duration; keep_ended "soon": want a positive duration such as 5m, 12h or 365d`},
		{"AccountingKeep", "accounting {\n  keep = \"-1d\"\n}\n", `schedd.hcl:2:10: Invalid duration; accounting.keep "-1d"`},
		{"AccountingDriver", "accounting {\n  driver = \"mysql\"\n}\n", `schedd.hcl:2:12: Invalid driver; accounting.driver "mysql": want "sqlite" or "postgres"`},
		{"AccountingUnknown", "accounting {\n  kep = \"1d\"\n}\n", `schedd.hcl:2:3: Unsupported argument; An argument named "kep" is not expected here. Did you mean "keep"?`},
		{"AccountingTwice", "accounting {\n}\naccounting {\n}\n", `schedd.hcl:3:1: Duplicate block`},
		{"Bytes", "max_queued_input_per_user = \"-1\"\n", `schedd.hcl:1:29: Invalid size; max_queued_input_per_user "-1": want a size such as "64MiB", a number of bytes, or 0 (unlimited)`},
		{"CountFraction", "max_queued_per_user = 2.5\n", `schedd.hcl:1:23: Invalid value; max_queued_per_user must be a whole number`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "schedd.hcl")
			if err := os.WriteFile(p, []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), p+":") {
				t.Errorf("err = %v\nwant %s:… %q", err, p, tc.want)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "nope.hcl")); err == nil || !strings.Contains(err.Error(), "nope.hcl") {
		t.Errorf("err = %v", err)
	}
}
