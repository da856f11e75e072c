job "apps" {
  image   = "host"
  command = ["python3", "-m", "http.server", "8000"]

  service "Web" {
    port = 8000
  }

  service "web" {
    port = 70000
  }

  service "web" {
    port     = 8000
    protocol = "tcp"
  }

  service "ok" {
    port = "eighty"
  }

  service "none" {
  }
}
