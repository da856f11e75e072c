"""Read-your-writes against a follower: a 3-peer schedd whose follower
at $TROUPE_TEST_FOLLOWER is the client's only address (python_test.go's
TestPythonReadYourWrites starts the cluster and runs this module). The
writes go to the leader through the follower's redirect; the reads are
answered by the follower, which applies each write a moment after the
leader acknowledged it."""

import json
import os
import unittest

import troupe

FOLLOWER = os.environ.get("TROUPE_TEST_FOLLOWER")
CWD = os.environ.get("TROUPE_TEST_CWD") or os.getcwd()

JOB = """
job "%(name)s" {
  image   = "host"
  command = ["/bin/sh", "-c", %(script)s]
  resources {
    cpu    = 0.1
    memory = "32MiB"
  }
}
"""

ROUNDS = 8


def job_file(name, script="true"):
    return JOB % {"name": name, "script": json.dumps(script)}


@unittest.skipUnless(FOLLOWER, "a 3-peer cluster: set $TROUPE_TEST_FOLLOWER (python_test.go's TestPythonReadYourWrites does)")
class ReadYourWritesTest(unittest.TestCase):

    def client(self):
        return troupe.Client(FOLLOWER, timeout=30)

    def submit(self, c, name, hold=False):
        return c.submit(job_file(name), cwd=CWD, hold=hold)["job_id"]

    def test_submit_then_get(self):
        """Each round a new client: it knows nothing but its own write."""
        for i in range(ROUNDS):
            c = self.client()
            job_id = self.submit(c, "get-%d" % i)
            self.assertGreater(c.written, 0, "the submit's answer carried no state index")
            job = c.get(job_id)  # NotFound on a follower that lags
            self.assertEqual(job["id"], job_id)
            self.assertIn(job_id, [j["id"] for j in c.list()], "round %d: the job list misses job %d" % (i, job_id))

    def test_submit_then_wait(self):
        for i in range(ROUNDS):
            c = self.client()
            job_id = self.submit(c, "wait-%d" % i)
            job = c.wait(job_id, timeout=60)
            self.assertEqual(job["state"], "COMPLETED", job)

    def test_control_then_get(self):
        """hold, release and kill: the next read shows each."""
        for i in range(ROUNDS // 2):
            c = self.client()
            job_id = self.submit(c, "held-%d" % i, hold=True)
            self.assertEqual(c.get(job_id)["state"], "HELD")
            c.release(job_id)
            self.assertNotEqual(c.get(job_id)["state"], "HELD", "round %d: the release of job %d is not seen" % (i, job_id))
            job_id = self.submit(c, "killed-%d" % i, hold=True)
            before = c.written
            c.kill(job_id)
            self.assertGreater(c.written, before, "the kill's answer carried no later state index")
            self.assertEqual(c.get(job_id)["state"], "CANCELLED", "round %d: the kill of job %d is not seen" % (i, job_id))


if __name__ == "__main__":
    unittest.main()
