partition "cpu" {
  nodes = ["n[1-4]", "gpu[16-01]", "x[1-", "c[1-2]*"]
}
