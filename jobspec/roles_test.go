package jobspec_test

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/jobspec"
)

// host writes a container as "host/role/idx/rank image [command]".
func host(c jobspec.Container) string {
	return c.Host + "/" + c.Role + "/" + strconv.Itoa(c.Idx) + "/" + strconv.Itoa(c.Rank) + " " + c.Image +
		" [" + strings.Join(c.Command, " ") + "]"
}

func TestContainers(t *testing.T) {
	tests := []struct {
		name     string
		src      string // the body of job "t" { image = "img" ... }
		want     []string
		replicas string
	}{
		{"single", `command = ["run"]`,
			[]string{"main1/main/1/0 img [run]"}, "main:1"},
		{"subs wait", "command = [\"mpirun\"]\ncluster { size = 3 }",
			[]string{"main1/main/1/0 img [mpirun]", "sub1/sub/1/1 img []", "sub2/sub/2/2 img []"}, "main:1,sub:2"},
		{"sub command", "command = [\"a\"]\ncluster { size = 2 }\nrole \"sub\" { command = [\"b\"] }",
			[]string{"main1/main/1/0 img [a]", "sub1/sub/1/1 img [b]"}, "main:1,sub:1"},
		{"main override", "command = [\"a\"]\nrole \"main\" {\n command = [\"m\"]\n image = \"mi\"\n}",
			[]string{"main1/main/1/0 mi [m]"}, "main:1"},
		{"main only from role", "role \"main\" { command = [\"m\"] }",
			[]string{"main1/main/1/0 img [m]"}, "main:1"},
		{"hetero size from roles", "command = [\"a\"]\nrole \"ps\" { replicas = 2 }\nrole \"worker\" {\n replicas = 3\n image = \"w\"\n command = [\"w\"]\n}",
			[]string{"main1/main/1/0 img [a]", "ps1/ps/1/1 img []", "ps2/ps/2/2 img []",
				"worker1/worker/1/3 w [w]", "worker2/worker/2/4 w [w]", "worker3/worker/3/5 w [w]"}, "main:1,ps:2,worker:3"},
		{"hetero with subs", "command = [\"a\"]\ncluster { size = 4 }\nrole \"gpu\" {}\nrole \"sub\" { replicas = 2 }",
			[]string{"main1/main/1/0 img [a]", "sub1/sub/1/1 img []", "sub2/sub/2/2 img []", "gpu1/gpu/1/3 img []"}, "main:1,sub:2,gpu:1"},
		{"zero replicas omitted", "command = [\"a\"]\nrole \"sub\" { replicas = 0 }\nrole \"w\" { replicas = 0 }",
			[]string{"main1/main/1/0 img [a]"}, "main:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "job \"t\" {\nimage = \"img\"\n" + tt.src + "\n}\n"
			j, diags := jobspec.Parse("t.hcl", []byte(src))
			if diags.HasErrors() {
				t.Fatalf("Parse:\n%s", jobspec.FormatDiagnostics(diags))
			}
			cs := j.Containers()
			var got []string
			for _, c := range cs {
				got = append(got, host(c))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Containers:\ngot  %q\nwant %q", got, tt.want)
			}
			if len(cs) != j.Cluster.Size {
				t.Errorf("%d containers, cluster size %d", len(cs), j.Cluster.Size)
			}
			if got := j.Replicas(); got != tt.replicas {
				t.Errorf("Replicas() = %q, want %q", got, tt.replicas)
			}
		})
	}
}

// TestContainersResources checks that role resources replace the job's
// per role, inheriting what the role leaves out.
func TestContainersResources(t *testing.T) {
	j := mustParse(t, "hetero.hcl")
	want := map[string]jobspec.Resources{
		"main1":   {CPU: 1, Memory: 2 << 30},
		"ps2":     {CPU: 8, Memory: 32 << 30},
		"worker4": {CPU: 4, Memory: 2 << 30, GPU: 2},
	}
	for _, c := range j.Containers() {
		if w, ok := want[c.Host]; ok && c.Resources != w {
			t.Errorf("%s resources = %+v, want %+v", c.Host, c.Resources, w)
		}
	}
	if got := j.Hosts(); got != "main1,ps1,ps2,worker1,worker2,worker3,worker4" {
		t.Errorf("Hosts() = %q", got)
	}
}

// TestContainersFromJSON expands a Job that did not come through Parse:
// zero CPU and Memory in a role inherit the job's; sub fills the size.
func TestContainersFromJSON(t *testing.T) {
	j := &jobspec.Job{
		Cluster:   jobspec.Cluster{Size: 4},
		Resources: jobspec.Resources{CPU: 2, Memory: 1 << 30},
		Image:     "img",
		Command:   []string{"a"},
		Roles: []jobspec.Role{
			{Name: "w", Replicas: 1, Resources: &jobspec.Resources{GPU: 1}},
		},
	}
	cs := j.Containers()
	if len(cs) != 4 || j.Replicas() != "main:1,sub:2,w:1" {
		t.Fatalf("got %d containers, replicas %q", len(cs), j.Replicas())
	}
	if r := cs[3].Resources; r != (jobspec.Resources{CPU: 2, Memory: 1 << 30, GPU: 1}) {
		t.Errorf("w1 resources = %+v", r)
	}
	cs[0].Command[0] = "changed"
	if j.Command[0] != "a" {
		t.Error("Containers shares its Command slices with the Job")
	}
}
