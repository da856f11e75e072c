job "notebook" {
  image   = "host"
  command = ["sh", "-c", "exec jupyter lab --no-browser --ServerApp.base_url=/apps/$TROUPE_JOB_ID/jupyter/"]

  service "jupyter" {
    port        = 8888
    keep_prefix = true
  }

  service "board" {
    port     = 6006
    protocol = "http"
  }
}
