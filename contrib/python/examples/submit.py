#!/usr/bin/env python3
"""Submit a job file, as `bsub job.hcl` does, and print its id.

    examples/submit.py job.hcl [-var name=value ...] [--hold]

schedd parses the file: an error names its file:line:col.
"""
import argparse
import sys

import troupe

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("file")
p.add_argument("-var", action="append", default=[], metavar="NAME=VALUE", help="set a variable of the file")
p.add_argument("--hold", action="store_true", help="submit it HELD")
a = p.parse_args()

try:
    res = troupe.Client().submit_file(a.file, vars=dict(v.split("=", 1) for v in a.var), hold=a.hold)
except troupe.TroupeError as e:
    sys.exit("submit: %s" % e)
print("Job <%d> is submitted to partition <%s>." % (res["job_id"], res["partition"]))
