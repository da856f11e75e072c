package nodelet

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestIsLocal(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"unix:///run/troupe/schedd.sock", true},
		{"/run/troupe/schedd.sock", true},
		{"127.0.0.1:4646", true},
		{"http://localhost:4646", true},
		{"http://[::1]:4646", true},
		{"10.0.0.5:4646", false},
		{"https://schedd.example:4646", false},
	}
	for _, tc := range tests {
		if got := isLocal(tc.addr); got != tc.want {
			t.Errorf("isLocal(%q) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func TestWithDefaults(t *testing.T) {
	init := filepath.Join(t.TempDir(), InitName)
	if err := os.WriteFile(init, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := Config{Addr: "127.0.0.1:1", InitBinary: init, FenceBinary: init}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Name == "" || c.CPU <= 0 || c.Memory <= 0 || c.Advertise != "127.0.0.1" ||
		c.StateDir != DefaultStateDir || c.Runtime != RuntimeAuto || c.StopGrace != DefaultStopGrace {
		t.Errorf("defaults not filled: %+v", c)
	}
	bad := []Config{
		{InitBinary: init},
		{Addr: "x:1", InitBinary: init, Advertise: "not-an-ip"},
		{Addr: "x:1", InitBinary: filepath.Join(t.TempDir(), "missing")},
		{Addr: "x:1", InitBinary: init, FenceBinary: filepath.Join(t.TempDir(), "missing")},
		{Addr: "x:1", InitBinary: init, FenceBinary: init, Heartbeat: -time.Second},
	}
	for _, b := range bad {
		if _, err := b.withDefaults(); err == nil {
			t.Errorf("withDefaults(%+v) = nil error", b)
		}
	}
}

func TestOpenOutput(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out")
	f, err := openOutput(p, os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("a\n")
	f.Close()
	f, err = openOutput(p, os.Getuid(), os.Getgid()) // appends
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("b\n")
	f.Close()
	if b, _ := os.ReadFile(p); string(b) != "a\nb\n" {
		t.Errorf("content = %q, want appended lines", b)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	if _, err := openOutput(link, os.Getuid(), os.Getgid()); err == nil {
		t.Error("output through a symlink was opened")
	}
	if os.Geteuid() == 0 {
		if _, err := openOutput(p, 4242, 4242); err == nil {
			t.Error("root appended to a file the job's uid does not own")
		}
		fresh := filepath.Join(dir, "fresh")
		f, err := openOutput(fresh, 4242, 4343)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		fi, _ := os.Stat(fresh)
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 4242 || st.Gid != 4343 {
			t.Errorf("new output owned by %d:%d, want 4242:4343", st.Uid, st.Gid)
		}
	}
}
