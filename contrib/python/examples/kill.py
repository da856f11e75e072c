#!/usr/bin/env python3
"""Kill jobs, as bkill does; with -s send a signal instead.

    examples/kill.py JOBID ... [-s SIGNAL]

A lost answer is retried with the same request id: the kill happens once.
"""
import argparse
import sys

import troupe

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("jobs", type=int, nargs="+")
p.add_argument("-s", "--signal", help="send this signal (USR1, TERM, 9, ...) rather than kill")
a = p.parse_args()

c = troupe.Client()
failed = False
for jid in a.jobs:
    try:
        if a.signal:
            c.signal(jid, a.signal)
            print("Job <%d>: signal %s sent" % (jid, a.signal))
        else:
            c.kill(jid)
            print("Job <%d> is being terminated" % jid)
    except troupe.APIError as e:
        print("kill: %s" % e, file=sys.stderr)  # schedd's message names the job: not found, not yours, ended
        failed = True
sys.exit(1 if failed else 0)
