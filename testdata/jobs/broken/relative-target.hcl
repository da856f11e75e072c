job "mounts" {
  image   = "host"
  command = ["ls", "data"]

  mount "data" {
    source = "/shared/data"
    target = "data"
  }
}
