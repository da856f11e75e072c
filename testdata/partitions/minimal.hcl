partition "all" {
  nodes = ["*"]
}
