job "walltime" {
  walltime = "2 hours"
  image    = "host"
  command  = ["sleep", "1"]
}
