package jobspec

import (
	"slices"
	"strconv"
	"strings"
)

// role returns the role block named name, or nil.
func (j *Job) role(name string) *Role {
	for i := range j.Roles {
		if j.Roles[i].Name == name {
			return &j.Roles[i]
		}
	}
	return nil
}

// mainCommand is main1's command: role main's if it gives one, else the
// job's. nil means none.
func (j *Job) mainCommand() []string {
	if r := j.role(RoleMain); r != nil && len(r.Command) > 0 {
		return r.Command
	}
	if len(j.Command) > 0 {
		return j.Command
	}
	return nil
}

// Containers expands the job into its session, in rank order: main1;
// then sub1 … sub(N) filling cluster size; then the containers of every
// other role, in the order of their blocks, named role+index (worker1,
// worker2). A role's image, command and resources replace the job's for
// its containers; subs have no command (they serve SSH and wait) unless
// role "sub" gives one. The result is freshly allocated; callers may
// change it.
func (j *Job) Containers() []Container {
	others := 0
	for _, r := range j.Roles {
		if r.Name != RoleMain && r.Name != RoleSub {
			others += max(r.Replicas, 0)
		}
	}
	subs := max(j.Cluster.Size-1-others, 0)
	out := make([]Container, 0, 1+subs+others)
	add := func(name string, n int, cmd []string) {
		r := j.role(name)
		image, res := j.Image, j.Resources
		if r != nil {
			if r.Image != "" {
				image = r.Image
			}
			if len(r.Command) > 0 {
				cmd = r.Command
			}
			if r.Resources != nil {
				res = *r.Resources
				if res.CPU == 0 {
					res.CPU = j.Resources.CPU
				}
				if res.Memory == 0 {
					res.Memory = j.Resources.Memory
				}
			}
		}
		for i := 1; i <= n; i++ {
			out = append(out, Container{
				Host:      name + strconv.Itoa(i),
				Role:      name,
				Idx:       i,
				Rank:      len(out),
				Image:     image,
				Command:   slices.Clone(cmd),
				Resources: res,
			})
		}
	}
	add(RoleMain, 1, j.Command)
	add(RoleSub, subs, nil)
	for _, r := range j.Roles {
		if r.Name != RoleMain && r.Name != RoleSub {
			add(r.Name, r.Replicas, nil)
		}
	}
	return out
}

// Replicas is the value of BACKENDAI_CLUSTER_REPLICAS: role:count pairs
// in rank order, such as "main:1,sub:3" or "main:1,ps:2,worker:4". Roles
// without containers are left out.
func (j *Job) Replicas() string {
	var parts []string
	count := 0
	cs := j.Containers()
	for i, c := range cs {
		count++
		if i+1 == len(cs) || cs[i+1].Role != c.Role {
			parts = append(parts, c.Role+":"+strconv.Itoa(count))
			count = 0
		}
	}
	return strings.Join(parts, ",")
}

// Hosts is the value of BACKENDAI_CLUSTER_HOSTS: every hostname in rank
// order, comma-separated ("main1,sub1,sub2").
func (j *Job) Hosts() string {
	cs := j.Containers()
	hosts := make([]string, len(cs))
	for i, c := range cs {
		hosts[i] = c.Host
	}
	return strings.Join(hosts, ",")
}

// MainCommand is main1's command: role main's if it gives one, else the
// job's; nil means none (main1 waits).
func (j *Job) MainCommand() []string { return j.mainCommand() }

// SetMainCommand makes cmd main1's command, over role main's (bsub -I
// CMD).
func (j *Job) SetMainCommand(cmd []string) {
	if r := j.role(RoleMain); r != nil {
		r.Command = nil
	}
	j.Command = cmd
}
