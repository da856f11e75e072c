# nodelet.hcl: one node's settings (nodelet --config, $TROUPE_NODELET_CONFIG,
# else /etc/troupe/nodelet.hcl). Command-line flags override these.

# The image catalog: job files name images from it ("pytorch-2.3").
images = "images.hcl"

# Job `mount` blocks may only mount sources under these directories (after
# resolving symlinks; ".." is refused). Unset: /tmp and the invoking
# user's home, for a dev cluster. [] refuses every mount.
allowed_mount_roots = ["/shared", "/scratch", "/home"]

# Report this many fake GPUs instead of discovering them with NVML (tests).
# fake_gpus = 4

# What the runc runtime starts containers with: auto (crun, else
# libcontainer in-process, else runc; see nodelet(8)), crun, libcontainer
# or runc.
# oci_runtime = "auto"

# Most tasks (processes and threads) one container may hold.
pids_limit = 4096

# Network namespaces kept prepared (loopback and default-network veth up)
# so that a container's setup skips making them; 0 turns the pool off.
# netns_pool = 4

# Jobs reachable as on a cluster (nodelet(8), "Reaching jobs"): this
# node's own default subnet in the cluster's container range, routed by
# the site (one route per node: its subnet via its address); containers
# reach the routed networks with their own address, the submit hosts in
# reach_from reach any container, and a user's containers reach only one
# another. host_ports opens ports of the node itself to its containers
# (a one-machine site's dask scheduler). Unset: NAT only.
# default_subnet  = "10.128.3.0/24"
# routed_networks = ["10.128.0.0/16", "192.168.1.0/24"]
# reach_from      = ["192.168.1.0/24"]
# host_ports      = [8786]

# What containers need only while they exist (bundles, overlay
# mountpoints, session files, network namespaces' pins, the OCI
# runtime's state): many small files made and removed with every
# container, so best on a tmpfs. Default: /run/troupe-nodelet (with the
# default state directory).
# run_dir = "/run/troupe-nodelet"

# Terminal (bsub -I, battach) and app (/apps) streams served at once: for
# one job, for one user's jobs (0: the defaults, 32 and 200; -1:
# unlimited), and in all (0: derived from the limit of open files). A
# stream past a cap is refused with a message naming it.
# max_streams_per_job  = 32
# max_streams_per_user = 200
# max_streams          = 0

# The node's health check (nodelet(8), HEALTH CHECKS): run as root at
# start and every interval; exit 0 is healthy, anything else (or running
# past the timeout, which kills its process group) drains the node with
# the program's first line as the reason, until it passes again. LBNL
# NHC works unchanged. The program must be owned by root and writable by
# no one else. Without a program the nodelet still checks its own file
# systems, container runtime and GPUs every interval.
# health_check {
#   program  = "/usr/sbin/nhc"
#   interval = "60s"
#   timeout  = "30s"
# }
