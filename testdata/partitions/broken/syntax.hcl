partition "cpu" {
  nodes = ["n1"
}
