package session

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
)

// fixture is a 4-container multi-node session, containers deliberately
// listed out of rank order.
func fixture() api.Job {
	c := func(host, role string, idx, rank int, addr string) api.Container {
		return api.Container{
			Container: jobspec.Container{Host: host, Role: role, Idx: idx, Rank: rank},
			KernelID:  "k-" + host, NodeAddr: addr,
		}
	}
	return api.Job{
		ID: 42, SessionID: "k-main1", User: "alice", UID: 1000, GID: 1000, Cwd: "/home/alice/exp",
		Spec: jobspec.Job{
			Cluster: jobspec.Cluster{Size: 4, Mode: jobspec.ModeMultiNode},
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
		job  func() api.Job
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
		{"SingleContainerDefaults", func() api.Job {
			return api.Job{ID: 7, SessionID: "s", User: "bob", Containers: []api.Container{{
				Container: jobspec.Container{Host: "main1", Role: "main", Idx: 1}, KernelID: "s",
			}}}
		}, "main1", map[string]string{
			"BACKENDAI_CLUSTER_SIZE":     "1",
			"BACKENDAI_CLUSTER_HOSTS":    "main1",
			"BACKENDAI_CLUSTER_REPLICAS": "main:1",
			"BACKENDAI_CLUSTER_MODE":     "single-node",
			"PATH":                       DefaultPath,
		}},
		{"HeterogeneousRoles", func() api.Job {
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

func TestEnvUnknownHost(t *testing.T) {
	if _, err := Env(fixture(), "sub9"); !errors.Is(err, ErrNoSuchHost) {
		t.Errorf("err = %v, want ErrNoSuchHost", err)
	}
}

func TestHosts(t *testing.T) {
	j := fixture()
	j.Containers = append(j.Containers, api.Container{Container: jobspec.Container{Host: "sub4", Rank: 4}})
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
