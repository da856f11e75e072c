package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestParseClientArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want options
	}{
		// OpenMPI's rsh launcher: `<agent> -x host orted ...`.
		{"OpenMPIOrted", []string{"-x", "sub1", "PATH=/usr/bin:$PATH", ";", "export", "PATH", ";", "/usr/bin/orted", "-mca", "ess", "env"},
			options{host: "sub1", command: []string{"PATH=/usr/bin:$PATH", ";", "export", "PATH", ";", "/usr/bin/orted", "-mca", "ess", "env"}}},
		{"UserPortOptions", []string{"-p2201", "-l", "bob", "-o", "SendEnv=FOO BAR", "-oConnectTimeout=3", "-tq", "alice@sub2"},
			options{host: "sub2", user: "bob", port: 2201, tty: 1, quiet: true, sendEnv: []string{"FOO", "BAR"}, connectTimeout: 3 * time.Second}},
		{"Shell", []string{"-T", "-n", "main1"}, options{host: "main1", tty: -1, noStdin: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseClientArgs(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if got.host != tc.want.host || got.user != tc.want.user || got.port != tc.want.port ||
				got.tty != tc.want.tty || got.quiet != tc.want.quiet || got.noStdin != tc.want.noStdin ||
				got.connectTimeout != tc.want.connectTimeout || !slices.Equal(got.command, tc.want.command) ||
				!slices.Equal(got.sendEnv, tc.want.sendEnv) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	if _, err := parseClientArgs([]string{"-p"}); err == nil {
		t.Error("-p without a port accepted")
	}
}

func TestReadConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(cfg, []byte("Host other\n\tPort 1\nHost main* sub*\n\tPort 2200\n\tIdentityFile ~/.ssh/id_cluster\n\tStrictHostKeyChecking no\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := options{host: "sub3"}
	readConfig(&o, cfg)
	if o.port != 2200 || !slices.Equal(o.identities, []string{"~/.ssh/id_cluster"}) {
		t.Errorf("sub3: %+v", o)
	}
	o = options{host: "sub3", port: 22}
	readConfig(&o, cfg)
	if o.port != 22 {
		t.Errorf("the command line's port lost to the config's: %d", o.port)
	}
	o = options{host: "elsewhere"}
	readConfig(&o, cfg)
	if o.port != 0 {
		t.Errorf("unmatched host got port %d", o.port)
	}
}
