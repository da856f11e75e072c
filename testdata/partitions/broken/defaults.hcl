default_partition = "gpu"
default_account   = "nobody"

partition "cpu" {
  default = true
  nodes   = ["n1"]
}

partition "cpu" {
  nodes = ["n2"]
}

partition "big" {
  default = true
}
