partition "cpu" {
  nodes            = ["n1"]
  allowed_accounts = ["lab", "ghost"]
}

account "lab" {
  shares = 0
  users  = ["ada", "ada"]
  user "bob" {
    default = true
  }
  account "lab" {
    users = ["cy"]
  }
}

account "other" {
  user "bob" {
    default = true
  }
}
