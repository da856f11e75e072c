job "noimage" {
  command = ["hostname"]
}
