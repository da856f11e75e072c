#!/usr/bin/env python3
"""Wait for a job to end and exit with its exit code (as bsub --wait).

    examples/wait.py JOBID [--timeout SECONDS]
"""
import argparse
import sys

import troupe

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("job", type=int)
p.add_argument("--timeout", type=float, default=None, help="give up after this many seconds")
a = p.parse_args()

try:
    job = troupe.Client().wait(a.job, timeout=a.timeout)
except troupe.TroupeError as e:  # WaitTimeout too
    sys.exit("wait: %s" % e)
print("job %d: %s, exit code %d%s" % (job["id"], job["state"], job["exit_code"],
                                       ": " + job["reason"] if job.get("reason") else ""))
sys.exit(0 if job["state"] == "COMPLETED" else (job["exit_code"] or 1))
