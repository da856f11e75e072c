#!/usr/bin/env python3
"""Print a job's output, as bpeek does; with -f follow it until the job ends.

    examples/logs.py JOBID [--host main1] [-f]

The output is a file in the job's submit directory (its output pattern):
run this where that directory is, as a user who may read it.
"""
import argparse
import os
import sys
import time

import troupe

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("job", type=int)
p.add_argument("--host", default="main1", help="the container (main1, sub1, ...)")
p.add_argument("-f", "--follow", action="store_true")
a = p.parse_args()

c = troupe.Client()
try:
    job = c.get(a.job)
    path = c.output_path(job, a.host)
except troupe.TroupeError as e:
    sys.exit("logs: %s" % e)
off = 0
while True:
    try:
        with open(path, "rb") as f:
            f.seek(off)
            chunk = f.read()
            off += len(chunk)
            sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
    except FileNotFoundError:
        if job["state"] in troupe.TERMINAL_STATES:
            sys.exit("logs: job %d (%s): no output at %s" % (a.job, job["state"], path))
    if not a.follow or job["state"] in troupe.TERMINAL_STATES:
        break
    time.sleep(1)
    job = c.get(a.job)
