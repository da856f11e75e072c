package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/sched/config"
)

// schedd --config etc/schedd.hcl takes the example's settings; flags
// given on the command line win.
func TestConfigFile(t *testing.T) {
	etc, _ := filepath.Abs("../../etc")
	o, err := parseFlags([]string{"--config", "../../etc/schedd.hcl"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.dataDir != "/var/lib/troupe/schedd" || o.socket != "/run/troupe/schedd.sock" || o.listen != "0.0.0.0:7946" ||
		o.tlsCert != "/etc/troupe/tls/cert.pem" || o.parts != filepath.Join(etc, "partitions.hcl") ||
		o.images != filepath.Join(etc, "images.hcl") || o.nodeTO != 30*time.Second || o.web != "127.0.0.1:8080" ||
		o.metrics != "127.0.0.1:9100" || o.verbose || time.Duration(o.keepEnded) != 5*time.Minute || o.acctDrv != "sqlite" ||
		time.Duration(o.acctKeep) != 365*24*time.Hour {
		t.Errorf("options from etc/schedd.hcl: %+v", o)
	}
	o, err = parseFlags([]string{"--config", "../../etc/schedd.hcl", "--data-dir", "/srv/schedd", "--node-timeout", "2m", "-v",
		"--web-addr", "127.0.0.1:9999"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.dataDir != "/srv/schedd" || o.nodeTO != 2*time.Minute || !o.verbose || o.web != "127.0.0.1:9999" || o.listen != "0.0.0.0:7946" {
		t.Errorf("flags did not override the file: %+v", o)
	}
	if o.joinFile != "/var/lib/troupe/schedd/join-token" {
		t.Errorf("join token file %q: the file's, not one under --data-dir", o.joinFile)
	}
}

// --keep-ended and --accounting-keep take days; a bad one is refused
// with the flag's name; the store defaults to DATA-DIR/accounting.db.
func TestAccountingFlags(t *testing.T) {
	o, err := parseFlags([]string{"--keep-ended", "2d", "--accounting-keep", "30d", "--data-dir", "/srv/s"}, io.Discard)
	if err != nil || time.Duration(o.keepEnded) != 48*time.Hour || time.Duration(o.acctKeep) != 30*24*time.Hour {
		t.Fatalf("%v %v %v", o.keepEnded, o.acctKeep, err)
	}
	if p := accountingPath(o); p != "/srv/s/accounting.db" {
		t.Errorf("store path %q", p)
	}
	if _, err := parseFlags([]string{"--keep-ended", "forever"}, io.Discard); err == nil || !strings.Contains(err.Error(), "keep-ended") {
		t.Errorf("--keep-ended forever: %v", err)
	}
}

// The submit limits come from the file or the flags; 0 queued is
// unlimited, and a cap above the API's reach is refused.
func TestSubmitLimitFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil || o.maxInput != 64<<10 || o.maxQueued != 10000 {
		t.Fatalf("defaults: %d bytes, %d queued, %v", o.maxInput, o.maxQueued, err)
	}
	p := filepath.Join(t.TempDir(), "schedd.hcl")
	if err := os.WriteFile(p, []byte("max_job_input = \"16KiB\"\nmax_queued_per_user = 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err = parseFlags([]string{"--config", p}, io.Discard)
	if err != nil || o.maxInput != 16<<10 || o.maxQueued != 0 || queuedLimit(o.maxQueued) >= 0 {
		t.Fatalf("from the file: %d bytes, %d queued, %v", o.maxInput, o.maxQueued, err)
	}
	if _, err := parseFlags([]string{"--max-job-input", "8MiB"}, io.Discard); err == nil || !strings.Contains(err.Error(), "max-job-input") {
		t.Fatalf("--max-job-input 8MiB: %v", err)
	}
	if _, err := parseFlags([]string{"--max-queued-per-user", "-1"}, io.Discard); err == nil {
		t.Fatal("--max-queued-per-user -1 taken")
	}
	if o.maxTotal != 0 {
		t.Fatalf("--max-queued defaults to %d, want 0 (unlimited)", o.maxTotal)
	}
	if err := os.WriteFile(p, []byte("max_queued = 200000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if o, err = parseFlags([]string{"--config", p}, io.Discard); err != nil || o.maxTotal != 200000 {
		t.Fatalf("max_queued from the file: %d, %v", o.maxTotal, err)
	}
	if _, err := parseFlags([]string{"--max-queued", "-1"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--max-queued ") {
		t.Fatalf("--max-queued -1: %v", err)
	}
	if o.maxBytes != 64<<20 {
		t.Fatalf("--max-queued-input-per-user defaults to %d, want 64MiB", o.maxBytes)
	}
	if err := os.WriteFile(p, []byte("max_queued_input_per_user = 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if o, err = parseFlags([]string{"--config", p}, io.Discard); err != nil || o.maxBytes != 0 || queuedLimit(int(o.maxBytes)) >= 0 {
		t.Fatalf("max_queued_input_per_user = 0 from the file: %d, %v", o.maxBytes, err)
	}
	if o, err = parseFlags([]string{"--max-queued-input-per-user", "1GiB"}, io.Discard); err != nil || o.maxBytes != 1<<30 {
		t.Fatalf("--max-queued-input-per-user 1GiB: %d, %v", o.maxBytes, err)
	}
	if _, err := parseFlags([]string{"--max-queued-input-per-user", "lots"}, io.Discard); err == nil || !strings.Contains(err.Error(), "max-queued-input-per-user") {
		t.Fatalf("--max-queued-input-per-user lots: %v", err)
	}
}

func TestConfigFileErrors(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"UnknownKey", "web_adr = \"127.0.0.1:8080\"\n", `:1:1: Unsupported argument; An argument named "web_adr" is not expected here. Did you mean "web_addr"?`},
		{"Invalid", "socket = \"/s\"\nnode_timeout = 30\n", `:2:16: Invalid duration; node_timeout "30"`},
		// The file's settings meet the same checks as flags.
		{"Checked", "listen = \"0.0.0.0:7946\"\n", "--listen needs TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "schedd.hcl")
			if err := os.WriteFile(p, []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := parseFlags([]string{"--config", p}, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	code := run([]string{"--config", "/nonexistent/schedd.hcl"}, io.Discard, io.Discard)
	if code != 2 {
		t.Errorf("a missing config file: exit %d, want 2", code)
	}
}

// Every key of schedd.hcl stands for a flag schedd has.
func TestConfigKeysAreFlags(t *testing.T) {
	var help strings.Builder
	run([]string{"-h"}, io.Discard, &help)
	for _, s := range config.Settings {
		if !regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(s.Flag) + `[ \t\n]`).MatchString(help.String() + "\n") {
			t.Errorf("schedd.hcl's %s: schedd has no flag -%s", s.Key, s.Flag)
		}
	}
}

// --web-tls serves the page with --tls-cert: it needs both.
func TestWebTLSFlag(t *testing.T) {
	for _, args := range [][]string{
		{"--web-tls"},
		{"--web-tls", "--web-addr", "127.0.0.1:8080"},
		{"--web-tls", "--tls-cert", "/c.pem", "--tls-key", "/k.pem"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil || !strings.Contains(err.Error(), "--web-tls needs") {
			t.Errorf("%q: %v, want --web-tls needs …", args, err)
		}
	}
	o, err := parseFlags([]string{"--web-tls", "--web-addr", "127.0.0.1:8080", "--tls-cert", "/c.pem", "--tls-key", "/k.pem"}, io.Discard)
	if err != nil || !o.webTLS {
		t.Errorf("--web-tls with --web-addr and a certificate: %v", err)
	}
}

// The stream caps per job and per user mean what the nodelet's do: 0 the
// default, -1 unlimited; the flags pass them to schedd's Config as given
// (sched's TestStreamCapMeaning reads them there).
func TestStreamCapFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil || o.streamsJob != 0 || o.streamsUser != 0 || o.streams != 0 {
		t.Fatalf("defaults: per job %d, per user %d, all %d, %v; want 0 (the defaults)", o.streamsJob, o.streamsUser, o.streams, err)
	}
	if o, err = parseFlags([]string{"--max-streams-per-job", "-1", "--max-streams-per-user", "7"}, io.Discard); err != nil || o.streamsJob != -1 || o.streamsUser != 7 {
		t.Fatalf("-1 and 7: %d %d, %v", o.streamsJob, o.streamsUser, err)
	}
	p := filepath.Join(t.TempDir(), "schedd.hcl")
	if err := os.WriteFile(p, []byte("max_streams_per_user = -1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if o, err = parseFlags([]string{"--config", p}, io.Discard); err != nil || o.streamsUser != -1 {
		t.Fatalf("max_streams_per_user = -1 in the file: %d, %v", o.streamsUser, err)
	}
	for _, bad := range [][]string{{"--max-streams-per-job", "-2"}, {"--max-streams-per-user", "-5"}, {"--max-streams", "-1"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%q: %v, want a refusal naming %s", bad, err, bad[0])
		}
	}
}
