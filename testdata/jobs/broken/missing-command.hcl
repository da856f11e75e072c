job "nocommand" {
  image = "host"

  role "sub" {
    command = ["sleep", "60"]
  }
}
