# nothing here
usage_half_life = "soon"
