package nodelet

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/catalog"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/nodelet/gpu"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
	"github.com/troupe-hpc/troupe/nodelet/session"
	"github.com/troupe-hpc/troupe/nodelet/sshkey"
)

// ContainerID is the runtime ID (and cgroup name) of a job's container
// in the job's current run: "troupe-" and its kernel id, unique across
// jobs, nodelets and clusters that share a machine (a name made of the
// job id and host collides between two clusters' job 1), and "-runN"
// after it for run N of a requeued job (its Requeues, N > 0). The kernel
// id survives a requeue, and two runs must not share a cgroup: tearing
// the earlier run down kills whatever is in its cgroup, and where two
// nodes share a machine (schedd --dev, the tests) a nodelet thawed or
// restarted after its node was declared down would kill the new run
// the other node started.
func ContainerID(j *api.AssignedJob, host string) string {
	run := ""
	if j.Requeues > 0 {
		run = fmt.Sprintf("-run%d", j.Requeues)
	}
	for _, c := range j.Containers {
		if c.Host == host && c.KernelID != "" {
			return "troupe-" + c.KernelID + run
		}
	}
	return fmt.Sprintf("troupe-j%d-%s%s", j.ID, host, run)
}

// id is the task's container ID: the one it was started with (its
// record's, for a re-attached container a nodelet that named them
// otherwise started), or ContainerID.
func (t *task) id() string {
	if t.cid != "" {
		return t.cid
	}
	return ContainerID(&t.job, t.key.host)
}

// filesOf is where the /etc/hosts and /etc/hostname of a container live.
func (a *specBuilder) filesOf(t *task) string { return filepath.Join(a.filesDir(), t.id()) }

// homeOf is the host directory of t's container's home (runtime.Spec.Home).
func (a *specBuilder) homeOf(t *task) string { return filepath.Join(a.homesDir(), t.id()) }

// removeFiles removes t's session files and its container's home (what
// the job left there included: RemoveAll does not follow its links); for
// a re-attached container, also where a nodelet from before RunDir kept
// its files.
func (a *specBuilder) removeFiles(t *task) {
	dirs := []string{a.filesOf(t), a.homeOf(t)}
	if t.adopted != nil {
		dirs = append(dirs, filepath.Join(a.cfg.StateDir, "files", t.id()))
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			a.log.Warn("removing container files", "dir", d, "err", err)
		}
	}
}

// buildSpec turns the task's job into a runtime.Spec: env, hosts files,
// output and error files (returned open; the caller closes them after
// Start).
func (a *specBuilder) buildSpec(t *task) (runtime.Spec, *userFiles, error) {
	job, host := t.job, t.key.host
	c, err := session.Container(job, host)
	if err != nil {
		return runtime.Spec{}, nil, err
	}
	feat := a.features(job)
	env, err := session.EnvWith(job, host, feat)
	if err != nil {
		return runtime.Spec{}, nil, err
	}
	var (
		devices  []runtime.Device
		mpsMount []runtime.Mount
	)
	if len(a.gpus) > 0 || len(c.GPUs) > 0 {
		pipe := ""
		if fractional(c.GPUs) && !t.mpsHeld {
			t.mpsHeld = true
			pipe = a.mps.acquire()
			if pipe != "" && a.rt.Name() == RuntimeRunc {
				mpsMount = []runtime.Mount{{Source: pipe, Target: pipe}}
			}
		}
		// runc gets only the container's device nodes: CUDA counts
		// them from 0 inside.
		env = append(env, gpu.Env(a.gpus, c.GPUs, pipe, a.rt.Name() == RuntimeRunc)...)
		for _, p := range gpu.DeviceNodes(c.GPUs) {
			d, err := runtime.DeviceAt(p)
			if err != nil {
				return runtime.Spec{}, nil, err
			}
			devices = append(devices, d)
		}
	}
	milli := c.Milli()
	cpus := a.coresFor(t, milli)
	if len(cpus) == 0 {
		for _, kv := range mpiBindingNone {
			if name, _, _ := strings.Cut(kv, "="); !hasEnv(env, name) {
				env = append(env, kv)
			}
		}
	}
	image, byPath, err := a.resolveImage(c.Image, job.Spec.Image)
	if err != nil {
		return runtime.Spec{}, nil, err
	}
	jobMounts := job.Spec.Mounts
	if home := a.hostHome(job, image, jobMounts); home != "" {
		// First: a submit directory inside it is mounted over it.
		jobMounts = append([]api.Mount{{Name: "home", Source: home, Target: home}}, jobMounts...)
		if !feat.Tools { // troupe's ssh keeps its keys in the session's home
			env = setEnv(env, "HOME", home)
		}
	}
	dataMounts, names, err := checkMounts(jobMounts, a.cfg.AllowedMountRoots)
	if err != nil {
		return runtime.Spec{}, nil, err
	}
	outPath, err := session.OutputPath(job, host)
	if err != nil {
		return runtime.Spec{}, nil, err
	}
	errPath, err := session.ErrorPath(job, host)
	if err != nil {
		return runtime.Spec{}, nil, err
	}
	paths := &userPaths{out: outPath, err: errPath, mounts: dataMounts, names: names}
	if byPath {
		paths.image = image
	}
	pins := ""
	if a.rt.Name() == RuntimeRunc {
		pins = filepath.Join(a.pinsDir(), t.id())
	}
	t.steps.mark("spec")
	files, err := openUserPaths(paths, job.UID, job.GID, pins)
	if err != nil {
		return runtime.Spec{}, nil, err
	}
	t.steps.mark("as-user")
	if byPath {
		image = paths.image
	}
	fs, err := a.writeFiles(t, feat)
	if err != nil {
		files.Close()
		return runtime.Spec{}, nil, err
	}
	t.steps.mark("files")
	var initArgs []string
	if feat.Tools {
		initArgs = []string{"--sshd", session.SSHDPath}
	}
	mounts := append(fs.mounts, paths.mounts...)
	mounts = append(mounts, mpsMount...)
	return runtime.Spec{
		ID: t.id(), Hostname: host, Image: image, ImageAsUser: byPath,
		Args: c.Command, Env: env, Workdir: job.Spec.Workdir,
		UID: job.UID, GID: job.GID,
		CPUMilli: milli, CPUs: cpus, Memory: c.Resources.Memory, Pids: a.cfg.PidsLimit,
		Mounts: mounts, Layer: fs.layer, Stdout: files.out, Stderr: files.err,
		Dir: filepath.Join(a.containersDir(), t.id()), Home: a.homeOf(t),
		Init: a.cfg.InitBinary, InitLayered: fs.initLayered, InitArgs: initArgs, Devices: devices,
		TTY: job.Interactive && c.Role == jobspec.RoleMain && c.Idx == 1 && len(c.Command) > 0,
	}, files, nil
}

// hostHome is the job user's home directory (the node's user database
// names it) for a container of the host image, which sees the node's
// tree but not its homes: the container gets it mounted at its path and
// as HOME, as a job on LSF or Slurm sees the user's home. "" when the
// image is not the host's, the job sets HOME itself or mounts something
// at that path, the user has no home of its own ("/" or none), or the
// home lies outside the node's allowed mount roots (the job then keeps
// the session's home).
func (a *specBuilder) hostHome(job api.AssignedJob, image string, mounts []api.Mount) string {
	if image != "" && image != runtime.ImageHost {
		return ""
	}
	if _, set := job.Spec.Env["HOME"]; set {
		return ""
	}
	u, err := user.LookupId(strconv.Itoa(job.UID))
	if err != nil || !filepath.IsAbs(u.HomeDir) {
		return ""
	}
	home := filepath.Clean(u.HomeDir)
	if home == "/" {
		return ""
	}
	for _, m := range mounts {
		if filepath.Clean(m.Target) == home {
			return ""
		}
	}
	if _, _, err := checkMounts([]api.Mount{{Name: "home", Source: home, Target: home}}, a.cfg.AllowedMountRoots); err != nil {
		a.log.Debug("the user's home is not mounted", "job", job.ID, "home", home, "err", err)
		return ""
	}
	return home
}

// setEnv sets name=value in env (KEY=VALUE entries, sorted).
func setEnv(env []string, name, value string) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	out = append(out, name+"="+value)
	slices.Sort(out)
	return out
}

// coresFor gives the container of t cores of its own when the runtime
// confines it to them (runc) and it asks for whole cores that are free;
// none otherwise (cpuset.go).
func (a *specBuilder) coresFor(t *task, milli int64) []int {
	n := wholeCores(milli)
	if n == 0 || a.rt.Name() != RuntimeRunc {
		return nil
	}
	got := a.cpus.take(t.id(), n)
	if got == nil {
		a.log.Info("no free cores of its own for a container of whole cores; MPI binding off", "id", t.id(), "cores", n)
	}
	return got
}

// resolveImage picks the container's image, else the job's, and turns a
// catalog name into its source path. "host" and paths (rootfs, OCI
// layout or archive, SIF) go to the runtime as they are; byPath says the
// image is a path the job named, which openUserPaths checks is the
// user's to use (a catalog's images are the admin's choice).
func (a *specBuilder) resolveImage(own, job string) (img string, byPath bool, err error) {
	img = own
	if img == "" {
		img = job
	}
	if img == "" || img == runtime.ImageHost {
		return img, false, nil
	}
	if !catalog.IsName(img) {
		if !filepath.IsAbs(img) {
			return "", false, fmt.Errorf("image %q: want \"host\", a catalog name or an absolute path", img)
		}
		return filepath.Clean(img), true, nil
	}
	src, err := a.catalog.Resolve(img)
	if err != nil {
		return "", false, err
	}
	return src.Path, false, nil
}

// features is what job's containers get beyond the environment: the
// node's, less troupe's SSH (server and client, session keys) in a
// one-container session that does not ask for it (jobspec ssh = true):
// nobody there has a peer to reach, and starting an SSH server per
// container costs CPU on every job. The hostfiles and LSF's host
// variables stay (mpirun and LSF scripts count the container's slots
// with them). bsub -I needs no SSH (its terminal comes from the runtime).
func (a *specBuilder) features(job api.AssignedJob) session.Features {
	f := a.feat
	if len(job.Containers) <= 1 && !job.Spec.SSH && f.Tools {
		f.Tools, f.Hostfiles = false, true
	}
	return f
}

// containerFiles are what writeFiles made for a container: its mounts
// and its layer (runtime.Spec's Layer and InitLayered).
type containerFiles struct {
	mounts      []runtime.Mount
	layer       string
	initLayered bool
}

// writeFiles writes the container's files under filesOf and returns
// their mounts: /etc/hosts and /etc/hostname always; the session's
// hostfiles (session.SessionDir) where feat has them; with troupe's SSH
// its keys and config (session.SSHDir), readable only by the job's user,
// and troupe-ssh (session.SSHDPath, session.SSHPath); troupe-slurm
// (session.SrunPath) where feat has srun. All but the keys, which go in
// the container's home, are files of its layer (filesOf/layer, each at
// its path in the container), and the runc runtime also gets
// troupe-init and the binaries as hard links there (toolCopies): it lays
// the layer over an image's root and mounts none of them.
func (a *specBuilder) writeFiles(t *task, feat session.Features) (containerFiles, error) {
	dir := a.filesOf(t)
	layer := filepath.Join(dir, "layer")
	// etc/ and .troupe/ (the session's hostfiles go there); tool makes
	// the binaries' directories.
	for _, d := range []string{filepath.Join(layer, "etc"), filepath.Join(layer, filepath.Dir(session.ToolsDir))} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return containerFiles{}, err
		}
	}
	out := containerFiles{layer: layer}
	files := []struct{ target, content string }{
		{"/etc/hosts", session.HostsWith(t.job, feat)},
		{"/etc/hostname", session.Hostname(t.key.host)},
	}
	for _, f := range files {
		p := filepath.Join(layer, f.target)
		if err := os.WriteFile(p, []byte(f.content), 0o644); err != nil {
			return containerFiles{}, err
		}
		out.mounts = append(out.mounts, runtime.Mount{Source: p, Target: f.target, ReadOnly: true, Layered: true})
	}
	// The binaries: hard links of the nodelet's copies where the runtime
	// lays the layer (runc), bind mounts of the configured files where a
	// link cannot be made (the run directory spans file systems) or the
	// runtime does not.
	tool := func(src, target string) error {
		if a.rt.Name() == RuntimeRunc {
			p := filepath.Join(layer, target)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			err := a.tools.link(src, p)
			if err == nil {
				if target == runtime.InitPath {
					out.initLayered = true
				} else {
					out.mounts = append(out.mounts, runtime.Mount{Source: p, Target: target, ReadOnly: true, Layered: true})
				}
				return nil
			}
			a.log.Warn("tool not in the container's layer; bind-mounting it", "path", src, "err", err)
		}
		if target != runtime.InitPath {
			out.mounts = append(out.mounts, runtime.Mount{Source: src, Target: target, ReadOnly: true})
		}
		return nil
	}
	if err := tool(a.cfg.InitBinary, runtime.InitPath); err != nil {
		return containerFiles{}, err
	}
	if feat.HasHostfiles() {
		sess := filepath.Join(layer, session.SessionDir)
		if err := writeDir(sess, 0o755, 0, 0, []sshkey.File{
			{Name: "hostfile", Data: []byte(session.HostfileOpenMPIText(t.job)), Mode: 0o644},
			{Name: "hostfile.mpich", Data: []byte(session.HostfileMPICHText(t.job)), Mode: 0o644},
			{Name: "djob_hostfile", Data: []byte(session.HostfileLSFText(t.job)), Mode: 0o644},
		}); err != nil {
			return containerFiles{}, err
		}
		out.mounts = append(out.mounts, runtime.Mount{Source: sess, Target: session.SessionDir, ReadOnly: true, Layered: true})
	}
	if feat.Tools {
		key, err := sshkey.Derive(a.secret, t.job.SessionID)
		if err != nil {
			return containerFiles{}, err
		}
		sshFiles, err := sshkey.Files(key, fmt.Sprintf("troupe-job-%d", t.job.ID), session.SSHPort)
		if err != nil {
			return containerFiles{}, err
		}
		ssh := filepath.Join(dir, "ssh")
		if err := writeDir(ssh, 0o700, t.job.UID, t.job.GID, sshFiles); err != nil {
			return containerFiles{}, err
		}
		out.mounts = append(out.mounts, runtime.Mount{Source: ssh, Target: session.SSHDir, ReadOnly: true})
		for _, target := range []string{session.SSHDPath, session.SSHPath} {
			if err := tool(a.cfg.SSHBinary, target); err != nil {
				return containerFiles{}, err
			}
		}
	}
	if feat.Srun && feat.SlurmDir == "" {
		if err := tool(a.cfg.SlurmBinary, session.SrunPath); err != nil {
			return containerFiles{}, err
		}
	}
	return out, nil
}

// writeDir creates dir (mode, owned by uid:gid) holding files, each
// owned by uid:gid too. It is created empty first, so no file is ever
// readable by others on the way.
func writeDir(dir string, mode os.FileMode, uid, gid int, files []sshkey.File) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	for _, f := range files {
		p := filepath.Join(dir, f.Name)
		if err := os.WriteFile(p, f.Data, f.Mode); err != nil {
			return err
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return err
		}
	}
	if err := os.Lchown(dir, uid, gid); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}
