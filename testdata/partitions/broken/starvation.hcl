partition "a" {
  nodes                = ["n1"]
  starvation_threshold = "0"
}

partition "b" {
  nodes                = ["n2"]
  starvation_threshold = "soon"
}
