job "syntax" {
  image   = "host"
  command = ["echo", "hi"
}
