package session

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// fixture is a 4-container multi-node session, containers deliberately
// listed out of rank order.
func fixture() api.AssignedJob {
	c := func(host, role string, idx, rank int, addr string) api.Container {
		return api.Container{
			ContainerSpec: wire.ContainerToAPI(jobspec.Container{Host: host, Role: role, Idx: idx, Rank: rank}),
			KernelID:      "k-" + host, NodeAddr: addr,
		}
	}
	return api.AssignedJob{
		ID: 42, Name: "train", SessionID: "k-main1", User: "alice", UID: 1000, GID: 1000, Cwd: "/home/alice/exp",
		Spec: api.JobSpec{
			Cluster: api.Cluster{Size: 4, Mode: jobspec.ModeMultiNode},
			Env:     map[string]string{"EPOCHS": "10", "PATH": "/opt/bin:/usr/bin", "BACKENDAI_CLUSTER_SIZE": "99"},
		},
		Containers: []api.Container{
			c("sub2", "sub", 2, 2, "10.0.0.2"),
			c("main1", "main", 1, 0, "10.0.0.1"),
			c("sub1", "sub", 1, 1, "10.0.0.1"),
			c("sub3", "sub", 3, 3, "10.0.0.2"),
		},
	}
}

func envMap(t *testing.T, env []string) map[string]string {
	t.Helper()
	if !slices.IsSorted(env) {
		t.Errorf("env not sorted: %v", env)
	}
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := m[k]; dup {
			t.Errorf("duplicate %s", k)
		}
		m[k] = v
	}
	return m
}

func TestEnv(t *testing.T) {
	tests := []struct {
		name string
		job  func() api.AssignedJob
		host string
		want map[string]string
	}{
		{"Sub2OfFour", fixture, "sub2", map[string]string{
			"BACKENDAI_CLUSTER_SIZE":       "4", // the job cannot override ours
			"BACKENDAI_CLUSTER_HOSTS":      "main1,sub1,sub2,sub3",
			"BACKENDAI_CLUSTER_REPLICAS":   "main:1,sub:3",
			"BACKENDAI_CLUSTER_HOST":       "sub2",
			"BACKENDAI_CLUSTER_IDX":        "2",
			"BACKENDAI_CLUSTER_ROLE":       "sub",
			"BACKENDAI_CLUSTER_LOCAL_RANK": "2",
			"BACKENDAI_CLUSTER_MODE":       "multi-node",
			"BACKENDAI_KERNEL_ID":          "k-sub2",
			"BACKENDAI_SESSION_ID":         "k-main1",
			"TROUPE_JOB_ID":                "42",
			"LSB_JOBID":                    "42",
			"LSB_JOBNAME":                  "train",
			"HOME":                         "/home/work",
			"USER":                         "alice",
			"PATH":                         "/opt/bin:/usr/bin", // the job's own wins over our default
			"EPOCHS":                       "10",
			"MASTER_ADDR":                  "main1",
			"WORLD_SIZE":                   "4",
			"RANK":                         "2",
		}},
		{"Main1", fixture, "main1", map[string]string{
			"BACKENDAI_CLUSTER_IDX":        "1",
			"BACKENDAI_CLUSTER_ROLE":       "main",
			"BACKENDAI_CLUSTER_LOCAL_RANK": "0",
			"BACKENDAI_KERNEL_ID":          "k-main1",
		}},
		{"SingleContainerDefaults", func() api.AssignedJob {
			return api.AssignedJob{ID: 7, SessionID: "s", User: "bob", Containers: []api.Container{{
				ContainerSpec: wire.ContainerToAPI(jobspec.Container{Host: "main1", Role: "main", Idx: 1}), KernelID: "s",
			}}}
		}, "main1", map[string]string{
			"BACKENDAI_CLUSTER_SIZE":     "1",
			"BACKENDAI_CLUSTER_HOSTS":    "main1",
			"BACKENDAI_CLUSTER_REPLICAS": "main:1",
			"BACKENDAI_CLUSTER_MODE":     "single-node",
			"PATH":                       DefaultPath,
		}},
		{"HeterogeneousRoles", func() api.AssignedJob {
			j := fixture()
			j.Containers[3].Role, j.Containers[3].Idx = "ps", 1
			return j
		}, "sub3", map[string]string{
			"BACKENDAI_CLUSTER_REPLICAS": "main:1,sub:2,ps:1",
			"BACKENDAI_CLUSTER_ROLE":     "ps",
			"BACKENDAI_CLUSTER_IDX":      "1",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, err := Env(tc.job(), tc.host)
			if err != nil {
				t.Fatal(err)
			}
			got := envMap(t, env)
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

// Every container gets Slurm's batch variables: the containers are the
// nodes, their slots the CPUs, SLURM_CPUS_PER_TASK divides them into
// tasks.
func TestSlurmEnv(t *testing.T) {
	j := fixture()
	j.Name, j.Partition, j.Account = "sim", "cpu", "physics"
	for i := range j.Containers {
		j.Containers[i].Resources = api.JobResources{CPU: 4, Memory: 2 << 30}
	}
	j.Containers[3].Resources.CPU = 2
	j.Spec.Env["SLURM_CPUS_PER_TASK"] = "2"
	j.Spec.Env["SLURM_JOB_ID"] = "999" // an outer job's: ours wins
	env, err := Env(j, "sub1")
	if err != nil {
		t.Fatal(err)
	}
	got := envMap(t, env)
	// Roles that sort otherwise than their ranks: Slurm's node order is
	// the host list's.
	h := fixture()
	h.Containers[2].Host, h.Containers[2].Role = "ps1", "ps" // rank 1
	h.Containers[0].Host = "alpha1"                          // rank 2
	henv, err := Env(h, "ps1")
	if err != nil {
		t.Fatal(err)
	}
	if hm := envMap(t, henv); hm["SLURM_JOB_NODELIST"] != "alpha1,main1,ps1,sub3" || hm["SLURM_NODEID"] != "2" {
		t.Errorf("roles: nodelist %q, ps1's node id %q; want alpha1,main1,ps1,sub3 and 2", hm["SLURM_JOB_NODELIST"], hm["SLURM_NODEID"])
	}
	for k, v := range map[string]string{
		"SLURM_JOB_ID": "42", "SLURM_JOBID": "42", "SLURM_JOB_NAME": "sim", "SLURM_JOB_PARTITION": "cpu",
		"SLURM_JOB_ACCOUNT": "physics", "SLURM_JOB_USER": "alice", "SLURM_JOB_UID": "1000",
		"SLURM_SUBMIT_DIR": "/home/alice/exp", "SLURM_JOB_NODELIST": "main1,sub[1-3]", "SLURM_NODELIST": "main1,sub[1-3]",
		"SLURM_JOB_NUM_NODES": "4", "SLURM_NNODES": "4", "SLURM_NTASKS": "7", "SLURM_NPROCS": "7",
		"SLURM_TASKS_PER_NODE": "2(x3),1", "SLURM_JOB_CPUS_PER_NODE": "4(x3),2", "SLURM_CPUS_ON_NODE": "4",
		"SLURM_NODEID": "1", "SLURMD_NODENAME": "sub1", "SLURM_MEM_PER_NODE": "2048", "SLURM_CPUS_PER_TASK": "2",
	} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestEnvUnknownHost(t *testing.T) {
	if _, err := Env(fixture(), "sub9"); !errors.Is(err, ErrNoSuchHost) {
		t.Errorf("err = %v, want ErrNoSuchHost", err)
	}
}

func TestHosts(t *testing.T) {
	j := fixture()
	j.Containers = append(j.Containers, api.Container{ContainerSpec: wire.ContainerToAPI(jobspec.Container{Host: "sub4", Rank: 4})})
	want := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"10.0.0.1\tmain1\n10.0.0.1\tsub1\n10.0.0.2\tsub2\n10.0.0.2\tsub3\n"
	if got := Hosts(j); got != want {
		t.Errorf("Hosts =\n%s\nwant\n%s", got, want)
	}
	if got := Hostname("sub1"); got != "sub1\n" {
		t.Errorf("Hostname = %q", got)
	}
}

func TestOutputPath(t *testing.T) {
	tests := []struct {
		name, pattern, cwd, host, want, wantErr string
	}{
		{"Default", "", "/home/alice/exp", "main1", "/home/alice/exp/troupe-42.main1.out", ""},
		{"AllVerbs", "%u/%j-%h-100%%.log", "/scratch", "sub2", "/scratch/alice/42-sub2-100%.log", ""},
		{"Absolute", "/var/log/%j.out", "", "main1", "/var/log/42.out", ""},
		{"UnknownVerbKept", "out-%x-%", "/w", "main1", "/w/out-%x-%", ""},
		{"CleansDots", "../logs/./%h.out", "/w/exp", "sub1", "/w/logs/sub1.out", ""},
		{"RelativeWithoutCwd", "x.out", "", "main1", "", "no absolute cwd"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := fixture()
			j.Spec.Output, j.Cwd = tc.pattern, tc.cwd
			got, err := OutputPath(j, tc.host)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestErrorPath(t *testing.T) {
	j := fixture()
	j.Cwd = "/home/alice/exp"
	if p, err := ErrorPath(j, "main1"); p != "" || err != nil {
		t.Errorf("no error pattern: %q, %v; want stderr with stdout", p, err)
	}
	j.Spec.Error = "%u-%j.%h.err"
	if p, err := ErrorPath(j, "sub2"); p != "/home/alice/exp/alice-42.sub2.err" || err != nil {
		t.Errorf("got %q, %v", p, err)
	}
	j.Cwd = ""
	if _, err := ErrorPath(j, "sub2"); err == nil || !strings.HasPrefix(err.Error(), `error "alice-42.sub2.err" is relative`) {
		t.Errorf("relative without cwd: %v", err)
	}
}

func TestClusterEnvAndHostfiles(t *testing.T) {
	j := fixture()
	j.Containers[0].Resources.CPU = 2   // sub2: 2 slots
	j.Containers[1].Resources.CPU = 0.5 // main1: 1 slot at least
	j.Containers[2].Resources.CPU = 3.9 // sub1: whole cores only
	f := Features{SessionNet: true, Iface: "eth0", Tools: true}
	env, err := EnvWith(j, "sub3", f)
	if err != nil {
		t.Fatal(err)
	}
	got := envMap(t, env)
	for k, v := range map[string]string{
		"LSB_JOBID":                   "42",
		"LSB_HOSTS":                   "main1 sub1 sub1 sub1 sub2 sub2 sub3",
		"LSB_MCPU_HOSTS":              "main1 1 sub1 3 sub2 2 sub3 1",
		"LSB_DJOB_HOSTFILE":           HostfileLSF,
		"LSB_DJOB_NUMPROC":            "7",
		"TROUPE_HOSTFILE":             HostfileOpenMPI,
		"TROUPE_MPICH_HOSTFILE":       HostfileMPICH,
		"MASTER_ADDR":                 "main1",
		"MASTER_PORT":                 "29500",
		"WORLD_SIZE":                  "4",
		"RANK":                        "3",
		"NODE_RANK":                   "3",
		"OMPI_MCA_plm_rsh_agent":      SSHPath,
		"PRTE_MCA_plm_ssh_agent":      SSHPath,
		"OMPI_MCA_btl_tcp_if_include": "eth0",
		"NCCL_SOCKET_IFNAME":          "eth0",
		"HYDRA_HOST_FILE":             HostfileMPICH,
		"PATH":                        "/opt/bin:/usr/bin:" + ToolsDir, // the job's PATH, our tools last
	} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	j.Spec.Env = map[string]string{"OMPI_MCA_btl_tcp_if_include": "ib0", "LSB_HOSTS": "x"}
	env, _ = EnvWith(j, "main1", f)
	got = envMap(t, env)
	if got["OMPI_MCA_btl_tcp_if_include"] != "ib0" || got["LSB_HOSTS"] == "x" || got["PATH"] != ToolsDir+":"+DefaultPath {
		t.Errorf("MPI settings are the job's to change, LSF's are not; PATH starts with the tools: %v", got)
	}
	// Without features: exactly what every runtime gives, no more.
	j.Spec.Env = nil
	plain, _ := Env(j, "main1")
	for _, kv := range plain {
		if strings.HasPrefix(kv, "LSB_HOSTS=") || strings.HasPrefix(kv, "OMPI_") || strings.Contains(kv, ToolsDir) {
			t.Errorf("plain env has %s", kv)
		}
	}
	if got, want := HostfileOpenMPIText(j), "main1 slots=1\nsub1 slots=3\nsub2 slots=2\nsub3 slots=1\n"; got != want {
		t.Errorf("OpenMPI hostfile %q, want %q", got, want)
	}
	if got, want := HostfileMPICHText(j), "main1:1\nsub1:3\nsub2:2\nsub3:1\n"; got != want {
		t.Errorf("MPICH hostfile %q, want %q", got, want)
	}
	if got, want := HostfileLSFText(j), "main1\nsub1\nsub1\nsub1\nsub2\nsub2\nsub3\n"; got != want {
		t.Errorf("LSF hostfile %q, want %q", got, want)
	}
	for i := range j.Containers {
		j.Containers[i].Addr = "10.64.0." + string(rune('2'+j.Containers[i].Rank))
	}
	if got := HostsWith(j, f); !strings.Contains(got, "10.64.0.2\tmain1\n10.64.0.3\tsub1\n") || strings.Contains(got, "10.0.0.1") {
		t.Errorf("hosts on a session network:\n%s", got)
	}
}
