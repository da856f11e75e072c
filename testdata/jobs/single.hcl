# The smallest job: one container (main1) with the defaults:
# single-node, 1 cpu, 1 GiB, workdir /home/work.
job "hello" {
  image   = "host"
  command = ["echo", "hello"]
}
