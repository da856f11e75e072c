package session

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/hostlist"
	"github.com/troupe-hpc/troupe/jobspec"
)

// DefaultPath is the PATH a container gets unless the job sets its own.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// MasterPort is the PyTorch rendezvous port in MASTER_PORT.
const MasterPort = 29500

// Env returns the environment every container of job gets, whatever
// its runtime: EnvWith with no Features.
func Env(job api.AssignedJob, host string) ([]string, error) {
	return EnvWith(job, host, Features{})
}

// EnvWith returns the environment of job's container host as sorted
// "KEY=value" entries. Three layers, later ones winning:
//
//  1. defaults the job may override: HOME=/home/work, USER, LOGNAME,
//     PATH=DefaultPath;
//  2. the job's own env (Spec.Env);
//  3. what describes the session, which the job cannot override:
//     BACKENDAI_*, TROUPE_JOB_ID, LSB_JOBID, and the PyTorch rendezvous
//     variables MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, NODE_RANK;
//     for an element of a job array TROUPE_ARRAY_INDEX and
//     TROUPE_ARRAY_ID, LSF's LSB_JOBINDEX, LSB_JOBINDEX_END and
//     LSB_JOBINDEX_STEP, Slurm's SLURM_ARRAY_JOB_ID and
//     SLURM_ARRAY_TASK_ID, _MIN, _MAX, _COUNT and _STEP;
//     and Slurm's SLURM_* (slurmEnv).
//
// Features add what the container's runtime provides (see Features and
// clusterEnv): the LSF host lists and hostfiles, the MPI launcher
// settings, troupe's ssh first on PATH.
func EnvWith(job api.AssignedJob, host string, f Features) ([]string, error) {
	self, err := Container(job, host)
	if err != nil {
		return nil, err
	}
	env := map[string]string{
		"HOME":    "/home/work",
		"USER":    job.User,
		"LOGNAME": job.User,
		"PATH":    DefaultPath,
	}
	if f.Tools {
		env["PATH"] = ToolsDir + ":" + DefaultPath
	}
	maps.Copy(env, mpiDefaults(f))
	maps.Copy(env, job.Spec.Env)
	maps.Copy(env, sessionEnv(job, self))
	maps.Copy(env, slurmEnv(job, self))
	if f.HasHostfiles() {
		maps.Copy(env, clusterEnv(job))
	}
	if f.Tools {
		if !slices.Contains(strings.Split(env["PATH"], ":"), ToolsDir) {
			env["PATH"] += ":" + ToolsDir
		}
	}
	if dir := cmp.Or(f.SlurmDir, SlurmDir); f.Srun && !slices.Contains(strings.Split(env["PATH"], ":"), dir) {
		env["PATH"] = dir + ":" + env["PATH"]
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out, nil
}

// sessionEnv is layer 3 of Env.
func sessionEnv(job api.AssignedJob, self api.Container) map[string]string {
	ordered := byRank(job.Containers)
	hosts := make([]string, len(ordered))
	for i, c := range ordered {
		hosts[i] = c.Host
	}
	size := strconv.Itoa(len(ordered))
	rank := strconv.Itoa(self.Rank)
	env := map[string]string{
		"BACKENDAI_CLUSTER_SIZE":       size,
		"BACKENDAI_CLUSTER_HOSTS":      strings.Join(hosts, ","),
		"BACKENDAI_CLUSTER_REPLICAS":   replicas(ordered),
		"BACKENDAI_CLUSTER_HOST":       self.Host,
		"BACKENDAI_CLUSTER_IDX":        strconv.Itoa(self.Idx),
		"BACKENDAI_CLUSTER_ROLE":       self.Role,
		"BACKENDAI_CLUSTER_LOCAL_RANK": rank,
		"BACKENDAI_CLUSTER_MODE":       mode(job),
		"BACKENDAI_KERNEL_ID":          self.KernelID,
		"BACKENDAI_SESSION_ID":         job.SessionID,
		"TROUPE_JOB_ID":                strconv.FormatUint(job.ID, 10),
		"LSB_JOBID":                    strconv.FormatUint(job.ID, 10),
		"LSB_JOBNAME":                  job.Name,
		"MASTER_ADDR":                  mainHost(ordered),
		"MASTER_PORT":                  strconv.Itoa(MasterPort),
		"WORLD_SIZE":                   size,
		"RANK":                         rank,
		"NODE_RANK":                    rank,
	}
	maps.Copy(env, arrayEnv(job))
	return env
}

// arrayEnv describes an element of a job array (nothing for another
// job): its index and its array's bounds as LSF, Slurm and troupe name
// them. LSB_JOBID is the array's id, as LSF gives it to every element,
// and LSB_JOBNAME the element's name, the array's with the index
// ("sweep[5]");
// TROUPE_JOB_ID stays the element's own (what bkill and bjob take).
func arrayEnv(job api.AssignedJob) map[string]string {
	if job.ArrayID == 0 {
		return nil
	}
	id := strconv.FormatUint(job.ArrayID, 10)
	idx := strconv.Itoa(job.ArrayIndex)
	env := map[string]string{
		"TROUPE_ARRAY_ID":     id,
		"TROUPE_ARRAY_INDEX":  idx,
		"LSB_JOBID":           id,
		"LSB_JOBINDEX":        idx,
		"LSB_JOBNAME":         job.Name + "[" + idx + "]",
		"SLURM_ARRAY_JOB_ID":  id,
		"SLURM_ARRAY_TASK_ID": idx,
	}
	if sp := job.ArraySpan; sp != nil {
		env["LSB_JOBINDEX_END"] = strconv.Itoa(sp.Max)
		env["LSB_JOBINDEX_STEP"] = strconv.Itoa(sp.Step)
		env["SLURM_ARRAY_TASK_MIN"] = strconv.Itoa(sp.Min)
		env["SLURM_ARRAY_TASK_MAX"] = strconv.Itoa(sp.Max)
		env["SLURM_ARRAY_TASK_COUNT"] = strconv.Itoa(sp.Count)
		env["SLURM_ARRAY_TASK_STEP"] = strconv.Itoa(sp.Step)
	}
	return env
}

// slurmEnv is what Slurm's batch step tells a script about its job,
// in layer 3: the containers are Slurm's nodes (SLURM_JOB_NODELIST is
// their host names, "main1,sub[1-3]", which srun and ssh reach, in the
// list's order), their
// slots its CPUs, and the tasks are the slots divided by
// SLURM_CPUS_PER_TASK where the job's env sets it (sbatch -c does).
func slurmEnv(job api.AssignedJob, self api.Container) map[string]string {
	cpt := 1
	if n, err := strconv.Atoi(job.Spec.Env["SLURM_CPUS_PER_TASK"]); err == nil && n > 0 {
		cpt = n
	}
	// Slurm's node order is its host list's (sorted): SLURM_NODEID and
	// the per-node counts follow it, as srun does.
	byHost := map[string]api.Container{}
	var hosts []string
	for _, c := range job.Containers {
		byHost[c.Host] = c
		hosts = append(hosts, c.Host)
	}
	nodelist := hostlist.Compress(hosts)
	order, _ := hostlist.Expand(nodelist)
	var cpus, tasks []int
	ntasks, nodeID := 0, 0
	for i, h := range order {
		c := byHost[h]
		if h == self.Host {
			nodeID = i
		}
		cpus = append(cpus, Slots(c))
		tasks = append(tasks, max(1, Slots(c)/cpt))
		ntasks += max(1, Slots(c)/cpt)
	}
	env := map[string]string{
		"SLURM_JOB_ID":            strconv.FormatUint(job.ID, 10),
		"SLURM_JOBID":             strconv.FormatUint(job.ID, 10),
		"SLURM_JOB_NAME":          job.Name,
		"SLURM_JOB_USER":          job.User,
		"SLURM_JOB_UID":           strconv.Itoa(job.UID),
		"SLURM_JOB_GID":           strconv.Itoa(job.GID),
		"SLURM_JOB_PARTITION":     job.Partition,
		"SLURM_CLUSTER_NAME":      "troupe",
		"SLURM_SUBMIT_DIR":        job.Cwd,
		"SLURM_JOB_NODELIST":      nodelist,
		"SLURM_NODELIST":          nodelist,
		"SLURM_JOB_NUM_NODES":     strconv.Itoa(len(order)),
		"SLURM_NNODES":            strconv.Itoa(len(order)),
		"SLURM_NTASKS":            strconv.Itoa(ntasks),
		"SLURM_NPROCS":            strconv.Itoa(ntasks),
		"SLURM_TASKS_PER_NODE":    perNode(tasks),
		"SLURM_JOB_CPUS_PER_NODE": perNode(cpus),
		"SLURM_CPUS_ON_NODE":      strconv.Itoa(Slots(self)),
		"SLURM_NODEID":            strconv.Itoa(nodeID),
		"SLURMD_NODENAME":         self.Host,
		"SLURM_MEM_PER_NODE":      strconv.FormatInt(self.Resources.Memory>>20, 10),
	}
	if job.Account != "" {
		env["SLURM_JOB_ACCOUNT"] = job.Account
	}
	return env
}

// perNode writes counts as Slurm's SLURM_TASKS_PER_NODE does: runs of
// equal counts as "4(x2),2".
func perNode(counts []int) string {
	var parts []string
	for i := 0; i < len(counts); {
		j := i
		for j < len(counts) && counts[j] == counts[i] {
			j++
		}
		if j-i == 1 {
			parts = append(parts, strconv.Itoa(counts[i]))
		} else {
			parts = append(parts, strconv.Itoa(counts[i])+"(x"+strconv.Itoa(j-i)+")")
		}
		i = j
	}
	return strings.Join(parts, ",")
}

// byRank returns the containers sorted by Rank (a copy).
func byRank(cs []api.Container) []api.Container {
	out := slices.Clone(cs)
	slices.SortStableFunc(out, func(a, b api.Container) int { return a.Rank - b.Rank })
	return out
}

// replicas is "role:count" pairs in the order roles first appear by rank
// (main first, as main1 is rank 0).
func replicas(ordered []api.Container) string {
	var roles []string
	count := map[string]int{}
	for _, c := range ordered {
		if count[c.Role] == 0 {
			roles = append(roles, c.Role)
		}
		count[c.Role]++
	}
	parts := make([]string, len(roles))
	for i, r := range roles {
		parts[i] = r + ":" + strconv.Itoa(count[r])
	}
	return strings.Join(parts, ",")
}

func mode(job api.AssignedJob) string {
	if job.Spec.Cluster.Mode == "" {
		return jobspec.ModeSingleNode
	}
	return job.Spec.Cluster.Mode
}

func mainHost(ordered []api.Container) string {
	for _, c := range ordered {
		if c.Role == jobspec.RoleMain {
			return c.Host
		}
	}
	if len(ordered) > 0 {
		return ordered[0].Host
	}
	return ""
}
