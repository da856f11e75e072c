#!/usr/bin/env python3
"""List jobs with the server's filters, as bqueue does.

    examples/list.py [-u USER] [-p PARTITION] [-s STATE ...] [--running-or-pending] [-n LIMIT]
"""
import argparse
import sys

import troupe

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("-u", "--user", action="append", help="only this user's jobs (repeatable)")
p.add_argument("-p", "--partition", action="append", help="only this partition's jobs (repeatable)")
p.add_argument("-s", "--state", action="append", help="only jobs in this state, e.g. RUNNING (repeatable)")
p.add_argument("--running-or-pending", action="store_true", help="leave ended jobs out")
p.add_argument("-n", "--limit", type=int, help="at most this many")
a = p.parse_args()

try:
    jobs = troupe.Client().list(user=a.user, partition=a.partition, state=a.state,
                                ended=False if a.running_or_pending else None, limit=a.limit)
except troupe.TroupeError as e:
    sys.exit("list: %s" % e)
print("%-8s %-10s %-12s %-10s %s" % ("JOBID", "USER", "STATE", "PARTITION", "NAME"))
for j in jobs:
    print("%-8d %-10s %-12s %-10s %s" % (j["id"], j["user"], j["state"], j["partition"], j["name"]))
