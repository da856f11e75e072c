// Package nodelet is the node agent: it runs the containers schedd
// assigns to this node and reports how they fare.
//
//	schedd ──assignments (blocking query)──▶ loop ──▶ reconcile
//	   ▲                                               │ one task per container
//	   └──────── reporter (queue, retried) ◀── task: preparing → running → exited|killed|failed
//
// What Run does, step by step:
//
//  1. Fill Config defaults: node name, CPU and memory from the node,
//     advertised IP, troupe-init next to the executable, runtime (runc
//     when root and runc is installed, else process; apptainer when
//     asked), allowed mount roots (nodelet.hcl, else /tmp and the
//     invoking user's home). Load the image catalog (internal/catalog)
//     and find the GPUs (package gpu: NVML, fake_gpus, or none).
//  2. Re-attach to what a previous run left running (recover.go): each
//     record under the run dir's records/ (job, host, run, container id,
//     bundle, netns, exit file; written once a container has started;
//     those a nodelet from before left under the state dir's records/
//     are moved there first) whose container
//     the runtime still knows (runtime Recover: runc state, then a pidfd
//     on its init; process and apptainer say ErrUnsupported) becomes a
//     task again, its session network adopted (network.Adopt) and its
//     MPS hold counted. A record marked exited (its final report saved
//     in it) is a teardown the previous run did not finish: its report
//     is queued again and it is cleaned with the rest. Then clean
//     everything else: the runtime's other
//     containers (runc delete --force), session links and pinned
//     namespaces of sessions with no re-attached container, bundles,
//     records and per-container files. Start the metrics server when
//     --metrics-addr is set (metrics.go: starts, failures by reason,
//     running containers, allocatable vs allocated CPU, memory and GPUs,
//     per-GPU shares and NVML use).
//  3. Start troupe-fence (fence.go, package fence): it kills the node's
//     containers once the lease from schedd runs out, even when this
//     process is frozen or dead. Register with schedd, retrying with
//     backoff until it answers; the answer grants the first lease.
//  4. Start the heartbeat, as often as schedd asks (its node timeout / 8;
//     re-registering if schedd forgot the node), each answer renewing the
//     lease (half the node timeout, written to STATE-DIR/lease), and the
//     report queue (package report), which delivers container updates in order and retries
//     until schedd takes them. No container starts while the lease has
//     run out.
//  5. Loop on GET assignments?index=N (blocking up to 30s). Each answer
//     is the complete desired state of the node; reconcile compares it
//     with the tasks running here (see reconcile for the table):
//     new containers get a task, containers of a job that is KillWanted
//     or gone are asked to stop.
//  6. A task reports preparing, resolves its image (catalog name → SIF,
//     OCI layout or archive, rootfs; runc unpacks them once per content
//     hash with package image, every blob checked against its digest,
//     a layout given by path read as the job's user) and checks its mounts (absolute, no "..", under
//     an allowed root: otherwise it fails before anything exists), opens
//     its output and error files, mount sources and image path as the
//     job's user (package asuser: no symlink, the user's permissions and
//     groups; runc mounts the opened files, pinned under STATE/pins),
//     adds the GPU variables of its shares
//     (CUDA_VISIBLE_DEVICES, MPS limits for fractions; the MPS control
//     daemon runs while fractional containers do, where its binary
//     exists, see mps.go) and their device nodes (runc), gives a
//     container of whole cores cores of its own (runc's cpuset; others
//     get Open MPI's binding off, see cpuset.go), builds the container's view (package
//     session: env, /etc/hosts, /etc/hostname, output file; with runc, in
//     sessions of two or more containers or with the job's ssh = true
//     (features in spec.go), also the hostfiles under /.troupe/session
//     and ~/.ssh with the session key of package sshkey, readable only by
//     the job's user), attaches it to
//     its session network (package network: the session's bridge, and a
//     VXLAN to the session's other nodes, made with its first container
//     here; the container's own namespace and address), starts it
//     (command, or troupe-init wait when the container has none; where
//     it gets ssh troupe-init first starts troupe-ssh's sshd on port 2200)
//     and reports running, or failed with the error. runc containers run
//     detached, their output going straight to the output file, so they
//     outlive the nodelet. It then waits: an exit
//     is reported exited with its code (oom, "out of memory (limit
//     256MiB)", when the kernel's OOM killer ended it); a stop request first delivers the signals asked
//     with it (a preempted job's warning), then sends SIGTERM, waits
//     StopGrace, sends SIGKILL and is reported killed. The final
//     report goes the moment the process ends (the record marked exited
//     first), and only then is the container destroyed (processes,
//     mounts, cgroup, bundle), taken off its network (the session's
//     links go with its last container here) and its files removed, off
//     the slot's path; a container with GPUs is destroyed before the
//     report (see holdsUntilDestroyed in task.go).
//  7. When ctx is cancelled (SIGTERM to the nodelet) reconcile does
//     nothing more (no start, no "lost" report for a container a
//     detaching task left running), every task stops and
//     destroys its container, the last reports get a few seconds to
//     reach schedd, and Run returns nil. When its cause is ErrDetach
//     (SIGQUIT) runc containers are left running, with their records,
//     for the next nodelet on the same state dir (step 2); a re-attached
//     container is reported running again, and reconcile stops it when
//     schedd no longer assigns it.
//
// It must not import sched/...: it reaches schedd through
// internal/client only, behind its schedd interface.
package nodelet
