partition "cpu" {
  nodes   = ["n1"]
  max_wall = "1h"
}
