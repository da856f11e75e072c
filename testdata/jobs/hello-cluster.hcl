# A 3-container cluster session: main1 greets the cluster and asks each
# sub over ssh who it is. Run it with `make demo`, or by hand:
#   bsub --wait hello-cluster.hcl
job "hello-cluster" {
  walltime = "5m"

  cluster {
    size = 3
    mode = "multi-node"
  }

  resources {
    cpu    = 1
    memory = "256MiB"
  }

  image   = "host"
  command = ["sh", "-c", <<-EOT
    echo "hello from $BACKENDAI_CLUSTER_HOST ($(hostname)), rank $BACKENDAI_CLUSTER_LOCAL_RANK of $BACKENDAI_CLUSTER_SIZE"
    echo "session $BACKENDAI_SESSION_ID: hosts $BACKENDAI_CLUSTER_HOSTS, replicas $BACKENDAI_CLUSTER_REPLICAS, mode $BACKENDAI_CLUSTER_MODE"
    grep -E 'main|sub' /etc/hosts
    for h in sub1 sub2; do
      ssh $h 'echo "ssh $(hostname): $BACKENDAI_CLUSTER_ROLE #$BACKENDAI_CLUSTER_IDX, rank $BACKENDAI_CLUSTER_LOCAL_RANK"'
    done
  EOT
  ]

  output = "hello-%j.%h.out"
}
