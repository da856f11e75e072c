package nodelet

import (
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/troupe-hpc/troupe/internal/hclattr"
	"github.com/troupe-hpc/troupe/nodelet/network"
)

// EnvConfig names the nodelet's config file when --config is not given.
const EnvConfig = "TROUPE_NODELET_CONFIG"

// DefaultConfigFile is read when it exists and neither --config nor
// $TROUPE_NODELET_CONFIG names another.
const DefaultConfigFile = "/etc/troupe/nodelet.hcl"

// File is nodelet.hcl: the admin's settings for one node. Command-line
// flags override it.
type File struct {
	// Images is the image catalog; relative paths are relative to the
	// config file.
	Images string
	// AllowedMountRoots are the only host directories job mount sources
	// may lie under. Unset: /tmp and the invoking user's home (a dev
	// cluster); an empty list refuses every mount.
	AllowedMountRoots *[]string
	// FakeGPUs replaces GPU discovery with that many fake devices.
	FakeGPUs int
	// PidsLimit caps the tasks of one container; 0: 4096.
	PidsLimit int64
	// DefaultSubnet is the default network's subnet (Config.DefaultSubnet):
	// "" for 10.199.0.0/16, "none" for no default network.
	DefaultSubnet string
	// RoutedNetworks, ReachFrom and HostPorts are Config's (routed_networks,
	// reach_from, host_ports).
	RoutedNetworks, ReachFrom []string
	HostPorts                 []int
	// NetNSPool is how many network namespaces the node keeps prepared
	// (Config.NetNSPool): unset for network.DefaultPool, 0 for none.
	NetNSPool *int
	// OCIRuntime is Config.OCIRuntime: "auto" (also ""), "crun",
	// "libcontainer", "runc", or "fake" with BenchmarkFakeRuntime.
	OCIRuntime string
	// BenchmarkFakeRuntime is Config.BenchmarkFakeRuntime
	// (benchmark_fake_runtime), which oci_runtime = "fake" needs.
	BenchmarkFakeRuntime bool
	// RunDir is Config.RunDir, an absolute path.
	RunDir string
	// MaxStreamsPerJob, MaxStreamsPerUser and MaxStreams are Config's:
	// unset or 0 for the defaults, -1 for unlimited (not MaxStreams).
	MaxStreamsPerJob, MaxStreamsPerUser, MaxStreams int
	// Health is the health_check block (Config.Health); zero without one.
	Health HealthCheck
}

// fileSchema is nodelet.hcl's attributes, every one optional.
var fileSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "images"}, {Name: "allowed_mount_roots"}, {Name: "fake_gpus"}, {Name: "pids_limit"},
	{Name: "default_subnet"}, {Name: "netns_pool"}, {Name: "oci_runtime"}, {Name: "benchmark_fake_runtime"}, {Name: "run_dir"},
	{Name: "max_streams_per_job"}, {Name: "max_streams_per_user"}, {Name: "max_streams"},
	{Name: "routed_networks"}, {Name: "reach_from"}, {Name: "host_ports"},
}, Blocks: []hcl.BlockHeaderSchema{{Type: "health_check"}}}

// healthSchema is the health_check block's attributes.
var healthSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "program"}, {Name: "interval"}, {Name: "timeout"},
}}

// LoadFile reads a nodelet.hcl. Errors carry file, line and column.
func LoadFile(path string) (File, error) {
	p := hclparse.NewParser()
	f, diags := p.ParseHCLFile(path)
	var fc File
	if !diags.HasErrors() {
		diags = decodeFile(f.Body, &fc)
	}
	if diags.HasErrors() {
		var b strings.Builder
		_ = hcl.NewDiagnosticTextWriter(&b, p.Files(), 0, false).WriteDiagnostics(diags)
		return File{}, errors.New(strings.TrimSpace(b.String()))
	}
	if fc.Images != "" && !filepath.IsAbs(fc.Images) {
		abs, err := filepath.Abs(filepath.Join(filepath.Dir(path), fc.Images))
		if err != nil {
			return File{}, err
		}
		fc.Images = abs
	}
	if fc.AllowedMountRoots != nil {
		for _, r := range *fc.AllowedMountRoots {
			if !filepath.IsAbs(r) {
				return File{}, fmt.Errorf("%s: allowed_mount_roots: %q is not an absolute path", path, r)
			}
		}
	}
	if fc.RunDir != "" && !filepath.IsAbs(fc.RunDir) {
		return File{}, fmt.Errorf("%s: run_dir %q: want an absolute path", at(f, path, "run_dir"), fc.RunDir)
	}
	if s := fc.DefaultSubnet; s != "" && s != DefaultSubnetNone {
		if err := network.CheckDefaultSubnet(s); err != nil {
			return File{}, fmt.Errorf("%s: default_subnet: %w", path, err)
		}
	}
	if err := CheckReach(fc.RoutedNetworks, fc.ReachFrom, fc.HostPorts); err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	if n := fc.NetNSPool; n != nil && (*n < 0 || *n > network.MaxPool) {
		return File{}, fmt.Errorf("%s: netns_pool = %d: want 0 (none) to %d", at(f, path, "netns_pool"), *n, network.MaxPool)
	}
	switch fc.OCIRuntime {
	case "", OCIAuto, OCICrun, OCILibcontainer, OCIRunc:
	case OCIFake:
		if !fc.BenchmarkFakeRuntime {
			return File{}, fmt.Errorf("%s: oci_runtime %q: %w", at(f, path, "oci_runtime"), fc.OCIRuntime, ErrFakeRuntime)
		}
	default:
		return File{}, fmt.Errorf("%s: oci_runtime %q: want auto, crun, libcontainer or runc", path, fc.OCIRuntime)
	}
	if fc.MaxStreamsPerJob < -1 || fc.MaxStreamsPerUser < -1 || fc.MaxStreams < 0 {
		return File{}, fmt.Errorf("%s: max_streams_per_job and max_streams_per_user take -1 (unlimited), 0 (the default) or more; max_streams 0 (derived from the limit of open files) or more", path)
	}
	if fc.FakeGPUs < 0 || fc.PidsLimit < 0 {
		return File{}, fmt.Errorf("%s: fake_gpus and pids_limit must not be negative", path)
	}
	return fc, nil
}

// decodeFile reads body's attributes into fc, hclattr's way (as job and
// partitions files are read): literal values only, each problem at its
// file:line:col.
func decodeFile(body hcl.Body, fc *File) hcl.Diagnostics {
	var d hclattr.Decoder
	c := d.Content(body, fileSchema)
	if c == nil {
		return d.Diags
	}
	attrs := d.Attrs(c.Attributes, "")
	attrs.String("images", &fc.Images)
	var roots []string
	if _, ok := attrs.Strings("allowed_mount_roots", &roots); ok {
		fc.AllowedMountRoots = &roots
	}
	attrs.Whole("fake_gpus", &fc.FakeGPUs)
	if v, a, ok := attrs.Value("pids_limit", cty.Number); ok {
		// An int64, as before: hclattr's whole numbers stop at int32.
		n, acc := v.AsBigFloat().Int64()
		if !v.AsBigFloat().IsInt() || acc != big.Exact {
			d.Errorf(a.Expr.Range(), "Invalid pids_limit", "pids_limit %s is not valid; it must be a whole number.", v.AsBigFloat().Text('g', -1))
		}
		fc.PidsLimit = n
	}
	attrs.String("default_subnet", &fc.DefaultSubnet)
	attrs.Strings("routed_networks", &fc.RoutedNetworks)
	attrs.Strings("reach_from", &fc.ReachFrom)
	if v, a, ok := attrs.Value("host_ports", cty.List(cty.Number)); ok && !v.IsNull() {
		for i, e := range v.AsValueSlice() {
			n, acc := e.AsBigFloat().Int64()
			if !e.AsBigFloat().IsInt() || acc != big.Exact || n < 1 || n > 65535 {
				d.Errorf(hclattr.ElemRange(a, i), "Invalid host_ports", "host port %s is not valid; it must be a whole number from 1 to 65535.", e.AsBigFloat().Text('g', -1))
				continue
			}
			fc.HostPorts = append(fc.HostPorts, int(n))
		}
	}
	var pool int
	if _, ok := attrs.Whole("netns_pool", &pool); ok {
		fc.NetNSPool = &pool
	}
	attrs.String("oci_runtime", &fc.OCIRuntime)
	attrs.Bool("benchmark_fake_runtime", &fc.BenchmarkFakeRuntime)
	attrs.String("run_dir", &fc.RunDir)
	attrs.Whole("max_streams_per_job", &fc.MaxStreamsPerJob)
	attrs.Whole("max_streams_per_user", &fc.MaxStreamsPerUser)
	attrs.Whole("max_streams", &fc.MaxStreams)
	for i, b := range c.Blocks {
		if i > 0 {
			d.Errorf(b.DefRange, "Duplicate health_check block", "nodelet.hcl takes one health_check block; another is at %s.", hclattr.Pos(c.Blocks[0].DefRange))
			continue
		}
		decodeHealth(&d, b.Body, &fc.Health)
	}
	return d.Diags
}

// decodeHealth reads a health_check block: program (an absolute path),
// interval and timeout (Go durations, "60s", above zero).
func decodeHealth(d *hclattr.Decoder, body hcl.Body, h *HealthCheck) {
	c := d.Content(body, healthSchema)
	if c == nil {
		return
	}
	attrs := d.Attrs(c.Attributes, "health_check")
	if a, ok := attrs.String("program", &h.Program); ok && !filepath.IsAbs(h.Program) {
		d.Errorf(a.Expr.Range(), "Invalid health_check program", "program %q is not valid; it must be an absolute path.", h.Program)
	}
	for _, f := range []struct {
		name string
		dst  *time.Duration
	}{{"interval", &h.Interval}, {"timeout", &h.Timeout}} {
		var s string
		a, ok := attrs.String(f.name, &s)
		if !ok {
			continue
		}
		v, err := time.ParseDuration(s)
		if err != nil || v <= 0 {
			d.Errorf(a.Expr.Range(), "Invalid health_check "+f.name, "%s %q is not valid; it must be a duration above zero such as \"60s\" or \"5m\".", f.name, s)
			continue
		}
		*f.dst = v
	}
}

// CheckReach checks routed_networks, reach_from and host_ports (their
// flags' values too): IPv4 CIDRs without host bits, ports from 1 to
// 65535.
func CheckReach(routed, from []string, ports []int) error {
	if _, err := network.ParseNets("routed_networks", routed); err != nil {
		return err
	}
	if _, err := network.ParseNets("reach_from", from); err != nil {
		return err
	}
	for _, p := range ports {
		if p < 1 || p > 65535 {
			return fmt.Errorf("%w: host_ports: %d is not a port (1 to 65535)", network.ErrReach, p)
		}
	}
	return nil
}

// reach is the node's network.Reach from cfg (CheckReach passed).
func reach(cfg Config) network.Reach {
	var r network.Reach
	r.Routed, _ = network.ParseNets("routed_networks", cfg.RoutedNetworks)
	r.From, _ = network.ParseNets("reach_from", cfg.ReachFrom)
	for _, p := range cfg.HostPorts {
		r.HostPorts = append(r.HostPorts, uint16(p))
	}
	return r
}

// at is where attribute name is set in f: file:line, or path alone.
func at(f *hcl.File, path, name string) string {
	if b, ok := f.Body.(*hclsyntax.Body); ok {
		if a, ok := b.Attributes[name]; ok {
			return fmt.Sprintf("%s:%d", path, a.SrcRange.Start.Line)
		}
	}
	return path
}

// ConfigPath picks the config file: flag, else $TROUPE_NODELET_CONFIG,
// else DefaultConfigFile when it exists; "" for none.
func ConfigPath(flag string) string {
	if flag != "" {
		return flag
	}
	if env := os.Getenv(EnvConfig); env != "" {
		return env
	}
	if _, err := os.Stat(DefaultConfigFile); err == nil {
		return DefaultConfigFile
	}
	return ""
}

// Apply copies the file's settings into c where c leaves them unset.
func (f File) Apply(c *Config) {
	if c.Images == "" {
		c.Images = f.Images
	}
	if c.AllowedMountRoots == nil && f.AllowedMountRoots != nil {
		c.AllowedMountRoots = append([]string{}, *f.AllowedMountRoots...)
	}
	if c.FakeGPUs == 0 {
		c.FakeGPUs = f.FakeGPUs
	}
	if c.PidsLimit == 0 {
		c.PidsLimit = f.PidsLimit
	}
	if c.DefaultSubnet == "" {
		c.DefaultSubnet = f.DefaultSubnet
	}
	if c.RoutedNetworks == nil {
		c.RoutedNetworks = f.RoutedNetworks
	}
	if c.ReachFrom == nil {
		c.ReachFrom = f.ReachFrom
	}
	if c.HostPorts == nil {
		c.HostPorts = f.HostPorts
	}
	if c.NetNSPool == 0 && f.NetNSPool != nil {
		c.NetNSPool = *f.NetNSPool
		if c.NetNSPool == 0 {
			c.NetNSPool = -1 // none
		}
	}
	if c.OCIRuntime == "" {
		c.OCIRuntime = f.OCIRuntime
	}
	c.BenchmarkFakeRuntime = c.BenchmarkFakeRuntime || f.BenchmarkFakeRuntime
	if c.RunDir == "" {
		c.RunDir = f.RunDir
	}
	if c.MaxStreamsPerJob == 0 {
		c.MaxStreamsPerJob = f.MaxStreamsPerJob
	}
	if c.MaxStreamsPerUser == 0 {
		c.MaxStreamsPerUser = f.MaxStreamsPerUser
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = f.MaxStreams
	}
	if c.Health == (HealthCheck{}) {
		c.Health = f.Health
	}
}
