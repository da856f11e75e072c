partition "cpu" {
  nodes = ["n1"]
}

license "matlab" {
  count = 0
}

license "matlab" {
  count = 4
}

license "1abaqus" {
  count = 2
}

license "ansys" {
  count = 2.5
}

license "fluent" {
}
