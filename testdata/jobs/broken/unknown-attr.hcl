job "typo" {
  image   = "host"
  command = ["echo", "hi"]
  walltme = "1h"

  resources {
    cpus = 2
  }

  mounts "data" {
    source = "/data"
    target = "/data"
  }
}
