job "output" {
  image   = "host"
  command = ["hostname"]
  output  = "run-%j-%x.out"
}
