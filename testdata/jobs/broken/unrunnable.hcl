# Values no node can run: each is refused where it is written.
job "unrunnable" {
  partition = "gpu\u0000x"
  resources {
    cpu    = 1e308
    memory = "4096PiB"
    gpu    = 1e9
  }
  image   = "../../etc"
  command = ["sh", "-c", "echo a\u0000b"]
  workdir = "/home/\u0000work"
  env     = { SECRET = "x\u0000y" }
  output  = "/tmp/out\u0000-%j"
  mount "data" {
    source = "/shared/\u0000data"
    target = "/data"
  }
  role "worker" {
    replicas = 1
    image    = "/images/../../etc"
  }
}
