# Variables, locals and functions work as in other HCL tools.
variable "nodes" {
  type    = number
  default = 3
}

variable "epochs" {
  default = 10
}

locals {
  name    = "exp-${lower("A7")}"
  dataset = "/shared/datasets/${local.base}"
  base    = join("-", ["imagenet", "2012"])
  common  = { OMP_NUM_THREADS = "4" }
}

job "exprs" {
  walltime = format("%dm", 30 * 3)

  cluster {
    size = var.nodes + 1
    mode = var.nodes > 1 ? "multi-node" : "single-node"
  }

  resources {
    cpu    = max(1, var.nodes) / 2
    memory = 512 * 1024 * 1024
    gpu    = min(0.25, 1)
  }

  image   = upper("cuda")
  command = concat(["python", "train.py"], ["--epochs", tostring(var.epochs)], [local.name])
  env     = merge(local.common, { EPOCHS = var.epochs, NAME = local.name })

  mount "data" {
    source = local.dataset
    target = "/home/work/${local.base}"
  }

  output = "${local.name}-%j-%h.out"
}
