package cli_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
)

var testCmd = cli.Command{
	Name:     "btest",
	Synopsis: "JOBID...",
	Summary:  "Test things.",
	Examples: []string{"btest 42"},
}

func newFlags() (*cli.FlagSet, *bool, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	fs := cli.NewFlagSet(testCmd, &out, &errb)
	fs.OutputFlag()
	wait := fs.Bool("wait", false, "wait for it")
	fs.Alias("K", "wait")
	return fs, wait, &out, &errb
}

func TestParseInterspersed(t *testing.T) {
	fs, wait, _, _ := newFlags()
	pos, err := fs.Parse([]string{"1", "-K", "2", "--addr", "unix:///x.sock", "-o", "json", "--", "-3"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"1", "2", "-3"}; !slices.Equal(pos, want) {
		t.Errorf("positional %q, want %q", pos, want)
	}
	if !*wait || fs.Format() != cli.FormatJSON || fs.Addr() != "unix:///x.sock" {
		t.Errorf("wait %v format %v addr %v", *wait, fs.Format(), fs.Addr())
	}
}

func TestAddrFromEnv(t *testing.T) {
	t.Setenv(client.EnvAddr, "unix:///env.sock")
	fs, _, _, _ := newFlags()
	if _, err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if fs.Addr() != "unix:///env.sock" {
		t.Errorf("addr %q", fs.Addr())
	}
	if fs.Format() != cli.FormatTable {
		t.Errorf("default format %q", fs.Format())
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		fs, _, out, errb := newFlags()
		_, err := fs.Parse([]string{arg})
		if code := fs.Exit(err); code != 0 {
			t.Errorf("%s: exit %d", arg, code)
		}
		for _, want := range []string{"Usage: btest [flags] JOBID...", "--addr address", "-o format", "--wait, -K", "Examples:\n  btest 42"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s: usage lacks %q:\n%s", arg, want, out)
			}
		}
		if errb.Len() != 0 {
			t.Errorf("%s: stderr %q", arg, errb)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "btest: flag provided but not defined: -bogus\n"},
		{[]string{"-o", "xml"}, `btest: invalid value "xml" for flag -o: want table or json` + "\n"},
		{[]string{"--addr"}, "btest: flag needs an argument: -addr\n"},
	}
	for _, tt := range tests {
		fs, _, out, errb := newFlags()
		_, err := fs.Parse(tt.args)
		if err == nil {
			t.Fatalf("%q: no error", tt.args)
		}
		if code := fs.Exit(err); code != 2 {
			t.Errorf("%q: exit %d", tt.args, code)
		}
		want := tt.want + "Run 'btest -h' for usage.\n"
		if errb.String() != want || out.Len() != 0 {
			t.Errorf("%q: stderr %q stdout %q, want %q", tt.args, errb, out, want)
		}
	}
}
