# A 4-container session whose subs run their own command instead of
# waiting, and whose main1 uses a different image and more memory.
job "serve" {
  walltime = "1:30:00" # Slurm style: 90 minutes

  cluster {
    size = 4
    mode = "multi-node"
  }

  resources {
    cpu    = 2
    memory = "4GiB"
  }

  image   = "python-3.12"
  command = ["python", "client.py"]

  role "main" {
    image = "python-3.12-tools"
    resources {
      memory = "8GiB"
    }
  }

  role "sub" {
    command = ["python", "server.py", "--port", "8000"]
  }
}
