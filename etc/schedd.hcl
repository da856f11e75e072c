# schedd.hcl: the controller's settings (schedd --config FILE; the systemd
# unit passes /etc/troupe/schedd.hcl). Every key is one of schedd's flags
# with underscores for dashes (data_dir is --data-dir); a flag given on the
# command line overrides the file. Relative paths are relative to this
# file's directory. See schedd(8).

# The raft log, snapshots and the join token live here (fsynced; back it
# up with `badmin snapshot save`).
data_dir = "/var/lib/troupe/schedd"

# The unix socket local users and tools reach schedd on (mode 0666; callers
# are known by their peer credentials).
socket = "/run/troupe/schedd.sock"

# The API over TCP, for nodelets and users on other machines: TLS, and a
# bearer token on every request (`badmin token create`).
listen   = "0.0.0.0:7946"
tls_cert = "/etc/troupe/tls/cert.pem"
tls_key  = "/etc/troupe/tls/key.pem"

# The token nodelets register with over TCP (made, 0600, when missing).
join_token_file = "/var/lib/troupe/schedd/join-token"

# Members of this group administer schedd as root does.
# admin_group = "hpcadmin"

# Partitions, limits, fair-share accounts and priority weights
# (troupe-partitions(5)); re-read on `badmin reconfig`.
partitions = "partitions.hcl"

# The image catalog: a job naming an image it lacks is refused at submit.
images = "images.hcl"

# A node silent this long is marked DOWN; its jobs end NODE_FAIL or are
# requeued.
node_timeout = "30s"

# Submit limits: the most bytes of text (commands, environment, mounts,
# paths) one job may hold, the most jobs one user may have PENDING or
# HELD at once, and the most all users together may (0: unlimited; a job
# array counts once), and the most bytes of text one user's PENDING and
# HELD jobs may hold together (0: unlimited). Larger jobs and jobs past a
# limit are refused at submit.
max_job_input             = "64KiB"
max_queued_per_user       = 10000
max_queued                = 0
max_queued_input_per_user = "64MiB"

# Stream limits: the most terminal (battach, bsub -I) and /apps streams
# one job, and one user, may have open at once (0: unlimited), and all
# users together (0: a quarter of what the limit of open files leaves
# beyond fd_reserve). Past a cap a stream is refused with 429. The last
# fd_reserve open files are kept for the nodes' heartbeats and reports
# (0: an eighth of the limit, at least 64). See schedd(8), SECURITY,
# Connection limits.
max_streams_per_job  = 32
max_streams_per_user = 200
max_streams          = 0
fd_reserve           = 0

# Ended jobs stay in the replicated state this long, then live only in
# the accounting store (bhist and bacct read both). See schedd(8),
# ACCOUNTING.
keep_ended = "5m"

# The accounting store: SQLite in data_dir (accounting.db, WAL), or
# PostgreSQL shared by every HA server (driver = "postgres",
# dsn = "postgres://troupe@db1/troupe"). keep deletes a record this long
# after its job ended (leave it out: forever).
accounting {
  driver = "sqlite"
  keep   = "365d"
}

# High availability: three (or five) schedd servers replicate the state
# with raft. Give each its own raft_addr and id; the same peers on all.
# The peers authenticate each other with mutual TLS: each presents
# tls_cert, and accepts only certificates from peer_ca (default: tls_cert
# itself, for peers that share one certificate and key).
# peer_ca   = "/etc/troupe/tls/ca.pem"
# raft_addr = "10.0.0.1:7950"
# peers     = ["s1=10.0.0.1:7950", "s2=10.0.0.2:7950", "s3=10.0.0.3:7950"]
# id        = "s1"
# advertise = "https://10.0.0.1:7946"
# A server added to a running cluster joins it instead (with an admin
# token in TROUPE_TOKEN):
# join = "https://10.0.0.1:7946"

# Prometheus metrics at http://ADDR/metrics (plain HTTP).
metrics_addr = "127.0.0.1:9100"

# The web page of the queue, nodes, partitions and fair share at
# http://ADDR/: anyone sees it as an anonymous user (others' jobs
# redacted); a user who logs in with a token (badmin token create)
# submits, kills, holds and releases their jobs and opens terminals.
# The token crosses the wire at login: keep the page on localhost
# (reach it through ssh -L), or serve it over TLS with web_tls.
web_addr = "127.0.0.1:8080"

# Serve web_addr over TLS with tls_cert and tls_key (https://ADDR/).
web_tls = false

# Log debug detail.
verbose = false
