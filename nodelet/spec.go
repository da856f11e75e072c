package nodelet

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
	"github.com/troupe-hpc/troupe/nodelet/session"
)

// containerID is the runtime ID of a job's container on this node.
func containerID(k key) string { return fmt.Sprintf("j%d-%s", k.job, k.host) }

// filesOf is where the /etc/hosts and /etc/hostname of a container live.
func (a *agent) filesOf(k key) string { return filepath.Join(a.filesDir(), containerID(k)) }

func (a *agent) removeFiles(t *task) {
	if err := os.RemoveAll(a.filesOf(t.key)); err != nil {
		a.log.Warn("removing container files", "err", err)
	}
}

// buildSpec turns the task's job into a runtime.Spec: env, hosts files,
// output file (returned open; the caller closes it after Start).
func (a *agent) buildSpec(t *task) (runtime.Spec, *os.File, error) {
	job, host := t.job, t.key.host
	c, err := session.Container(job, host)
	if err != nil {
		return runtime.Spec{}, nil, err
	}
	env, err := session.Env(job, host)
	if err != nil {
		return runtime.Spec{}, nil, err
	}
	image, err := resolveImage(c.Image, job.Spec.Image)
	if err != nil {
		return runtime.Spec{}, nil, err
	}
	mounts, err := a.writeFiles(t)
	if err != nil {
		return runtime.Spec{}, nil, err
	}
	for _, m := range job.Spec.Mounts {
		mounts = append(mounts, runtime.Mount{Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	outPath, err := session.OutputPath(job, host)
	if err != nil {
		return runtime.Spec{}, nil, err
	}
	out, err := openOutput(outPath, job.UID, job.GID)
	if err != nil {
		return runtime.Spec{}, nil, err
	}
	return runtime.Spec{
		ID: containerID(t.key), Hostname: host, Image: image,
		Args: c.Command, Env: env, Workdir: job.Spec.Workdir,
		UID: job.UID, GID: job.GID,
		CPU: c.Resources.CPU, Memory: c.Resources.Memory,
		Mounts: mounts, Stdout: out, Stderr: out,
		Dir:  filepath.Join(a.containersDir(), containerID(t.key)),
		Init: a.cfg.InitBinary,
	}, out, nil
}

// resolveImage picks the container's image, else the job's; only "host"
// and rootfs directories exist on a node for now.
func resolveImage(own, job string) (string, error) {
	img := own
	if img == "" {
		img = job
	}
	if img == "" || img == runtime.ImageHost || filepath.IsAbs(img) {
		return img, nil
	}
	return "", fmt.Errorf("image %q: catalog images are not supported on this node yet (use \"host\" or a rootfs directory)", img)
}

// writeFiles writes /etc/hosts and /etc/hostname for the container and
// returns their mounts.
func (a *agent) writeFiles(t *task) ([]runtime.Mount, error) {
	dir := a.filesOf(t.key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	files := []struct{ name, target, content string }{
		{"hosts", "/etc/hosts", session.Hosts(t.job)},
		{"hostname", "/etc/hostname", session.Hostname(t.key.host)},
	}
	var ms []runtime.Mount
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, []byte(f.content), 0o644); err != nil {
			return nil, err
		}
		ms = append(ms, runtime.Mount{Source: p, Target: f.target, ReadOnly: true})
	}
	return ms, nil
}
