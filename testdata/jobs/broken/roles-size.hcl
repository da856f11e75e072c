job "hetero" {
  image   = "host"
  command = ["hostname"]

  cluster {
    size = 4
  }

  role "worker" {
    replicas = 5
  }
}
