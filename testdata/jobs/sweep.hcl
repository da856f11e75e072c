# A job array: 100 elements, at most 10 running at once, each writing
# its own output file (%I is the element's index).
job "sweep" {
  image   = "host"
  command = ["sh", "-c", "python3 fit.py --seed $TROUPE_ARRAY_INDEX"]
  output  = "sweep-%j.%I.out"

  array {
    range       = "1-100"
    max_running = 10
  }
}
