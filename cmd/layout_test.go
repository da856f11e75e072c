package cmd

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/troupe-hpc/troupe"

// deps lists the non-standard packages pkg (a pattern relative to the
// repository root) is built from, itself included.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("SKIP: no go binary to list imports with")
	}
	cmd := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// TestImportRules keeps the few import rules the architecture rests on
// (docs/ARCHITECTURE.md): the scheduling core stays pure so bsim and
// schedd run the same code, the API views depend on no controller or
// node code, a user tool imports neither, and no binary carries a test
// helper.
func TestImportRules(t *testing.T) {
	t.Run("core imports only the standard library", func(t *testing.T) {
		// google/btree is a plain ordered container with no I/O;
		// internal/reason is the pending reasons and internal/depend the
		// dependency vocabulary, both standard library only.
		allowed := []string{module + "/sched/core", module + "/internal/reason", module + "/internal/depend", "github.com/google/btree"}
		for _, p := range deps(t, "./sched/core/...") {
			if !hasAnyPrefix(p, allowed) {
				t.Errorf("sched/core is built from %s: the core must stay pure (snapshot + now -> plan)", p)
			}
		}
	})
	t.Run("api imports no sched or nodelet", func(t *testing.T) {
		for _, p := range deps(t, "./internal/api") {
			if hasAnyPrefix(p, []string{module + "/sched", module + "/nodelet", module + "/cmd"}) {
				t.Errorf("internal/api is built from %s: the /v1 views must not depend on the controller or the node", p)
			}
		}
	})
	t.Run("httpapi imports no controller, state or raft", func(t *testing.T) {
		// The HTTP layer sees the controller through httpapi.Controller
		// and views only: never sched itself (which builds it), the
		// state's rows, the raft log or the libraries behind them.
		forbidden := []string{module + "/sched/state", module + "/sched/raftlog", module + "/accounting",
			"github.com/hashicorp/raft", "github.com/hashicorp/raft-boltdb", "github.com/hashicorp/go-memdb", "go.etcd.io/bbolt"}
		for _, p := range deps(t, "./sched/httpapi") {
			if p == module+"/sched" || hasAnyPrefix(p, forbidden) {
				t.Errorf("sched/httpapi is built from %s: handlers talk to the controller through httpapi.Controller and see views and sched/fault's errors only", p)
			}
		}
	})
	t.Run("user tools import no controller or node code", func(t *testing.T) {
		// The daemons, the binaries mounted into containers and bsim
		// are built from controller or node code; every other command
		// is a user tool that talks to schedd over the API.
		notTools := map[string]bool{
			"schedd": true, "nodelet": true, "troupe-init": true, "troupe-ssh": true,
			"troupe-fence": true, "troupe-nodesim": true, "bsim": true,
		}
		// The exceptions, each with its reason:
		allowed := map[string][]string{
			// srun (troupe-slurm, mounted into containers) finds
			// troupe-ssh where the nodelet mounts it (session.SSHPath).
			"troupe-slurm": {module + "/nodelet/session"},
		}
		for _, name := range commands(t) {
			if notTools[name] {
				continue
			}
			for _, p := range deps(t, "./cmd/"+name) {
				if hasAnyPrefix(p, []string{module + "/sched", module + "/nodelet"}) && !slices.Contains(allowed[name], p) {
					t.Errorf("user tool %s is built from %s: a user tool talks to schedd over the API (internal/client) and imports no sched/... or nodelet/... package", name, p)
				}
			}
		}
	})
	t.Run("api imports no job file parser", func(t *testing.T) {
		// A job's spec has the API's own wire type (api.JobSpec), so that
		// every client of the API is built without the job file's parser.
		for _, p := range deps(t, "./internal/api") {
			if p == module+"/jobspec" || hasAnyPrefix(p, hclPackages) {
				t.Errorf("internal/api is built from %s: the API carries a job's spec in its own types (api.JobSpec), never jobspec's", p)
			}
		}
	})
	t.Run("the state owns its schema", func(t *testing.T) {
		// The replicated state's rows and commands are its own types:
		// changing a view, the submit policy or the job file's form is
		// not a change to the raft log. It imports neither the API, nor
		// admission (the submit policy), nor the job file.
		forbidden := []string{module + "/internal/api", module + "/sched/admission", module + "/sched/core"}
		for _, p := range deps(t, "./sched/state") {
			if hasAnyPrefix(p, forbidden) {
				t.Errorf("sched/state is built from %s: rows and commands are the state's own types (sched/view.go converts them for clients)", p)
			}
		}
		for _, p := range imports(t, "./sched/state") {
			if p == module+"/jobspec" {
				t.Errorf("sched/state imports %s: admission resolves the job file into the row", p)
			}
		}
	})
	t.Run("user tools link no job file parser", func(t *testing.T) {
		// Only the commands that read job files (bsub, sbatch in
		// troupe-slurm, and the daemons that take them) link the HCL
		// parser; every other tool is built without it.
		parses := map[string]bool{
			"bsub": true, "troupe-slurm": true, "schedd": true, "nodelet": true, "troupe-nodesim": true,
		}
		for _, name := range commands(t) {
			if parses[name] {
				continue
			}
			for _, p := range deps(t, "./cmd/"+name) {
				if p == module+"/jobspec" || hasAnyPrefix(p, hclPackages) {
					t.Errorf("%s is built from %s: a tool that reads no job file links no job file parser", name, p)
				}
			}
		}
	})
	t.Run("no binary carries a test helper", func(t *testing.T) {
		cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./cmd/...")
		cmd.Dir = ".."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list ./cmd/...: %v", err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || !strings.HasPrefix(f[0], module+"/cmd/") {
				continue
			}
			for _, d := range f[1:] {
				if isTestHelper(d) {
					t.Errorf("%s is built from %s, a test helper", strings.TrimPrefix(f[0], module+"/"), d)
				}
			}
		}
	})
}

// hclPackages are the job file parser's libraries.
var hclPackages = []string{"github.com/hashicorp/hcl", "github.com/zclconf/go-cty"}

// imports lists the packages pkg imports itself.
func imports(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{join .Imports \" \"}}", pkg)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// commands lists the binaries under cmd/, by directory name.
func commands(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		t.Fatal("no commands under cmd/")
	}
	return names
}

// isTestHelper: troupe's test-only packages are named test... or ...test
// (clitest, runtimetest), are internal/eventually (tests' waits) or live
// under e2e.
func isTestHelper(p string) bool {
	if !strings.HasPrefix(p, module+"/") {
		return false
	}
	last := p[strings.LastIndex(p, "/")+1:]
	return strings.HasSuffix(last, "test") || strings.HasPrefix(last, "test") || strings.HasPrefix(p, module+"/e2e") ||
		p == module+"/internal/eventually"
}

func hasAnyPrefix(p string, prefixes []string) bool {
	for _, x := range prefixes {
		if p == x || strings.HasPrefix(p, x+"/") {
			return true
		}
	}
	return false
}
