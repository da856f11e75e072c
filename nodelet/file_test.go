package nodelet

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/nodelet/network"
)

func TestLoadExampleFile(t *testing.T) {
	f, err := LoadFile("../etc/nodelet.hcl")
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("../etc/images.hcl")
	if f.Images != abs || f.AllowedMountRoots == nil || !slices.Contains(*f.AllowedMountRoots, "/shared") || f.PidsLimit != 4096 {
		t.Errorf("etc/nodelet.hcl = %+v", f)
	}
	var c Config
	c.FakeGPUs = 2 // a flag wins
	f.FakeGPUs = 8
	f.Apply(&c)
	if c.FakeGPUs != 2 || c.Images != abs || len(c.AllowedMountRoots) != 3 {
		t.Errorf("applied = %+v", c)
	}
}

// TestLoadDefaultSubnet: nodelet.hcl sets the default network's subnet,
// or none; unset, the agent uses 10.199.0.0/16.
func TestLoadDefaultSubnet(t *testing.T) {
	for src, want := range map[string]string{
		"default_subnet = \"172.31.0.0/16\"\n": "172.31.0.0/16",
		"default_subnet = \"none\"\n":          DefaultSubnetNone,
		"":                                     "",
	} {
		p := filepath.Join(t.TempDir(), "nodelet.hcl")
		_ = os.WriteFile(p, []byte(src), 0o644)
		f, err := LoadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var c Config
		f.Apply(&c)
		if c.DefaultSubnet != want {
			t.Errorf("%q: default subnet %q, want %q", src, c.DefaultSubnet, want)
		}
	}
	c, err := Config{Addr: "unix:///x", InitBinary: "/bin/true", FenceBinary: "/bin/true", SSHBinary: "/bin/true", Runtime: RuntimeProcess, CPU: 1, Memory: 1}.withDefaults()
	if err != nil || c.DefaultSubnet != "10.199.0.0/16" {
		t.Errorf("default: %q, %v", c.DefaultSubnet, err)
	}
}

// TestLoadNetNSPool: nodelet.hcl sizes the node's pool of prepared
// network namespaces, 0 turning it off; unset, the agent keeps
// network.DefaultPool.
func TestLoadNetNSPool(t *testing.T) {
	for src, want := range map[string]int{
		"netns_pool = 8\n": 8,
		"netns_pool = 0\n": -1, // none
		"":                 network.DefaultPool,
	} {
		p := filepath.Join(t.TempDir(), "nodelet.hcl")
		_ = os.WriteFile(p, []byte(src), 0o644)
		f, err := LoadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		c := Config{Addr: "unix:///x", InitBinary: "/bin/true", FenceBinary: "/bin/true", SSHBinary: "/bin/true", Runtime: RuntimeProcess, CPU: 1, Memory: 1}
		f.Apply(&c)
		if c, err = c.withDefaults(); err != nil || c.NetNSPool != want {
			t.Errorf("%q: netns pool %d, %v; want %d", src, c.NetNSPool, err, want)
		}
	}
}

// TestLoadOCIRuntime: nodelet.hcl's oci_runtime applies where no
// --oci-runtime flag was given.
func TestLoadOCIRuntime(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nodelet.hcl")
	_ = os.WriteFile(p, []byte("oci_runtime = \"libcontainer\"\n"), 0o644)
	f, err := LoadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var c Config
	f.Apply(&c)
	if c.OCIRuntime != OCILibcontainer {
		t.Errorf("oci runtime %q, want %s", c.OCIRuntime, OCILibcontainer)
	}
	c = Config{OCIRuntime: OCIRunc} // the flag
	f.Apply(&c)
	if c.OCIRuntime != OCIRunc {
		t.Errorf("with the flag: %q, want %s", c.OCIRuntime, OCIRunc)
	}
}

// TestLoadFileTypes: every attribute's type, null as unset, and a
// pids_limit beyond an int32 (which hclattr's whole numbers stop at).
func TestLoadFileTypes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nodelet.hcl")
	_ = os.WriteFile(p, []byte(`images = "/i.hcl"
allowed_mount_roots = []
fake_gpus = 3
pids_limit = 99999999999
default_subnet = null
netns_pool = 0
oci_runtime = "runc"
run_dir = "/run/t"
`), 0o644)
	f, err := LoadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if f.Images != "/i.hcl" || f.AllowedMountRoots == nil || len(*f.AllowedMountRoots) != 0 || f.FakeGPUs != 3 ||
		f.PidsLimit != 99999999999 || f.DefaultSubnet != "" || f.NetNSPool == nil || *f.NetNSPool != 0 || f.OCIRuntime != OCIRunc ||
		f.RunDir != "/run/t" {
		t.Errorf("LoadFile = %+v", f)
	}
}

func TestLoadFileErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"Unknown", "fake_gpu = 2\n", "line 1"},
		{"RelativeRoot", "allowed_mount_roots = [\"data\"]\n", "not an absolute path"},
		{"Negative", "fake_gpus = -1\n", "must not be negative"},
		{"DefaultSubnetInSessions", "default_subnet = \"10.100.0.0/16\"\n", "default_subnet: default network subnet \"10.100.0.0/16\": overlaps the session networks"},
		{"DefaultSubnetBad", "default_subnet = \"10.199.0.0\"\n", "not an IPv4 CIDR"},
		{"NetNSPoolNegative", "# pool\nnetns_pool = -1\n", "nodelet.hcl:2: netns_pool = -1: want 0 (none) to 64"},
		{"NetNSPoolLarge", "netns_pool = 1000\n", "nodelet.hcl:1: netns_pool = 1000"},
		{"OCIRuntime", "oci_runtime = \"youki\"\n", "nodelet.hcl: oci_runtime \"youki\": want auto, crun, libcontainer or runc"},
		{"NotWhole", "# gpus\nfake_gpus = 1.5\n", "nodelet.hcl line 2"},
		{"NotWholeWhy", "fake_gpus = 1.5\n", "fake_gpus 1.5 is not valid; it must be a whole number"},
		{"PidsNotWhole", "pids_limit = 10.5\n", "pids_limit 10.5 is not valid"},
		{"Type", "images = [\"a\"]\n", `Inappropriate value for attribute "images": string required`},
		{"NullRoot", "allowed_mount_roots = [null]\n", "allowed_mount_roots holds a null element"},
		{"Function", "oci_runtime = upper(\"runc\")\n", "Functions may not be called here"},
		{"Block", "\nnetwork {}\n", "nodelet.hcl line 2"},
		{"RunDirRelative", "\nrun_dir = \"run\"\n", "nodelet.hcl:2: run_dir \"run\": want an absolute path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "nodelet.hcl")
			_ = os.WriteFile(p, []byte(tc.src), 0o644)
			if _, err := LoadFile(p); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestLoadStreamCaps: nodelet.hcl sets the caps on open streams, flags
// win, -1 is unlimited and anything below is refused.
func TestLoadStreamCaps(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nodelet.hcl")
	_ = os.WriteFile(p, []byte("max_streams_per_job = 8\nmax_streams_per_user = -1\nmax_streams = 500\n"), 0o644)
	f, err := LoadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	c := Config{MaxStreams: 100} // a flag wins
	f.Apply(&c)
	if c.MaxStreamsPerJob != 8 || c.MaxStreamsPerUser != -1 || c.MaxStreams != 100 {
		t.Errorf("applied = job %d user %d all %d, want 8 -1 100", c.MaxStreamsPerJob, c.MaxStreamsPerUser, c.MaxStreams)
	}
	if s := newStreams(c); s.PerJob != 8 || s.PerUser != 0 || s.Total() != 100 {
		t.Errorf("caps = job %d user %d all %d, want 8, none, 100", s.PerJob, s.PerUser, s.Total())
	}
	if s := newStreams(Config{}); s.PerJob != 32 || s.PerUser != 200 || s.Total() < 1 {
		t.Errorf("default caps = job %d user %d all %d, want 32 200 and some", s.PerJob, s.PerUser, s.Total())
	}
	_ = os.WriteFile(p, []byte("max_streams_per_job = -2\n"), 0o644)
	if _, err := LoadFile(p); err == nil || !strings.Contains(err.Error(), "max_streams_per_job") {
		t.Errorf("max_streams_per_job = -2: %v, want refused", err)
	}
}

// TestLoadReach: nodelet.hcl's routed_networks, reach_from and
// host_ports reach Config, flags win, and values the node cannot use are
// refused with the file and setting named.
func TestLoadReach(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nodelet.hcl")
	_ = os.WriteFile(p, []byte(`routed_networks = ["10.128.0.0/16", "192.168.1.0/24"]
reach_from      = ["192.168.1.10/32"]
host_ports      = [8786, 8787]
`), 0o644)
	f, err := LoadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	c := Config{ReachFrom: []string{"10.1.0.0/16"}} // a flag wins
	f.Apply(&c)
	if !slices.Equal(c.RoutedNetworks, []string{"10.128.0.0/16", "192.168.1.0/24"}) || !slices.Equal(c.ReachFrom, []string{"10.1.0.0/16"}) ||
		!slices.Equal(c.HostPorts, []int{8786, 8787}) {
		t.Errorf("applied: routed %v, from %v, ports %v", c.RoutedNetworks, c.ReachFrom, c.HostPorts)
	}
	r := reach(c)
	if len(r.Routed) != 2 || len(r.From) != 1 || !slices.Equal(r.HostPorts, []uint16{8786, 8787}) {
		t.Errorf("reach %+v", r)
	}
	for src, want := range map[string]string{
		`routed_networks = ["10.128.0.1/16"]`: "routed_networks: \"10.128.0.1/16\" has host bits set",
		`reach_from = ["fd00::/8"]`:           "reach_from: \"fd00::/8\" is not an IPv4 CIDR",
		`host_ports = [0]`:                    "host port 0 is not valid",
		`host_ports = [70000]`:                "host port 70000 is not valid",
		`host_ports = [80.5]`:                 "host port 80.5 is not valid",
	} {
		_ = os.WriteFile(p, []byte(src+"\n"), 0o644)
		if _, err := LoadFile(p); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want an error naming %s and %q", src, err, p, want)
		}
	}
	if err := CheckReach(nil, nil, []int{65536}); err == nil || !strings.Contains(err.Error(), "host_ports") {
		t.Errorf("a flag's port 65536: %v", err)
	}
	if !errors.Is(CheckReach([]string{"x"}, nil, nil), network.ErrReach) {
		t.Error("a bad CIDR is not ErrReach")
	}
}
