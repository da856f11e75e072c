job "mounts" {
  image   = "host"
  command = ["ls", "/data"]

  mount "a" {
    source = "/shared/a"
    target = "/data"
  }

  mount "b" {
    source = "/shared/b"
    target = "/data/"
  }
}
