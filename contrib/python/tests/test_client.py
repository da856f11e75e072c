"""Tests of the troupe client. The unit tests run anywhere; ServerTest
needs a real schedd with a nodelet at $TROUPE_ADDR (python_test.go in
the directory above starts `schedd --dev` and runs these)."""

import http.server
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest
from unittest import mock

import troupe

HOST_JOB = """
job "%(name)s" {
  image   = "host"
  command = ["/bin/sh", "-c", %(script)s]
  resources {
    cpu    = 0.1
    memory = "64MiB"
  }
}
"""


def job_file(script, name="py"):
    return HOST_JOB % {"name": name, "script": json.dumps(script)}


class AddressTest(unittest.TestCase):
    """Finding schedd as the troupe commands do."""

    def client(self, env, **kw):
        with mock.patch.dict(os.environ, env, clear=True):
            return troupe.Client(**kw)

    def test_default_socket(self):
        with tempfile.TemporaryDirectory() as home:
            c = self.client({"HOME": home})
        self.assertEqual(c.address, "unix:///run/troupe/schedd.sock")
        self.assertEqual(str(c._bases[0]), "unix:///run/troupe/schedd.sock")
        self.assertEqual(c.token, "")
        self.assertEqual(c.timeout, 60.0)

    def test_env_and_forms(self):
        c = self.client({"TROUPE_ADDR": "schedd.example:8443, https://b:9", "TROUPE_TOKEN": "tok", "TROUPE_TIMEOUT": "1m30s"})
        self.assertEqual([str(b) for b in c._bases], ["https://schedd.example:8443", "https://b:9"])
        self.assertEqual(c.token, "tok")
        self.assertEqual(c.timeout, 90.0)
        self.assertEqual(str(self.client({}, address="/tmp/s.sock")._bases[0]), "unix:///tmp/s.sock")
        with self.assertRaisesRegex(ValueError, "unix socket cannot be part"):
            self.client({}, address="/tmp/s.sock,b:1")
        with self.assertRaisesRegex(ValueError, "want unix://, https:// or http://"):
            self.client({}, address="ftp://x")
        with self.assertRaisesRegex(ValueError, "duration"):
            self.client({"TROUPE_TIMEOUT": "soon"})

    def test_token_file(self):
        with tempfile.TemporaryDirectory() as home:
            os.mkdir(os.path.join(home, ".troupe"))
            with open(os.path.join(home, ".troupe", "token"), "w") as f:
                f.write("secret-from-file\nsecond line\n")
            self.assertEqual(self.client({"HOME": home}).token, "secret-from-file")
            self.assertEqual(self.client({"HOME": home, "TROUPE_TOKEN": "env"}).token, "env")
            self.assertEqual(self.client({"HOME": home}, token="arg").token, "arg")

    def test_no_token_in_clear_text(self):
        c = self.client({}, address="http://192.0.2.1:1", token="t")
        with self.assertRaisesRegex(troupe.TroupeError, "refusing to send a token over plain http"):
            c.nodes()

    def test_unreachable(self):
        with tempfile.TemporaryDirectory() as d:
            c = self.client({}, address=os.path.join(d, "none.sock"), timeout=0.3)
            with self.assertRaises(troupe.Unreachable):
                c.nodes()


class _Recorder(http.server.BaseHTTPRequestHandler):
    """A stand-in schedd for what a single real one never does: answer
    503 not-applied, or redirect to a leader."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        srv = self.server
        n = int(self.headers.get("Content-Length", "0") or 0)
        self.rfile.read(n)
        srv.seen.append((self.command, self.path, self.headers.get("X-Troupe-Request"), self.headers.get("Authorization")))
        code, headers, body = srv.answers.pop(0)
        self.send_response(code)
        for k, v in headers.items():
            self.send_header(k, v)
        data = json.dumps(body).encode()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST


class RetryTest(unittest.TestCase):
    def serve(self, *answers):
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
        srv.seen, srv.answers = [], list(answers)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        return srv, "http://127.0.0.1:%d" % srv.server_address[1]

    def test_not_applied_is_sent_again_with_the_same_id(self):
        srv, addr = self.serve(
            (503, {"Retry-After": "0", "X-Troupe-Outcome": "not-applied"}, {"error": "no leader elected yet; retry"}),
            (200, {}, {"id": 7, "state": "HELD"}))
        job = troupe.Client(addr, token="", timeout=5).hold(7)
        self.assertEqual(job["state"], "HELD")
        self.assertEqual(len(srv.seen), 2)
        self.assertEqual(srv.seen[0][2], srv.seen[1][2])
        self.assertTrue(srv.seen[0][2])

    def test_redirect_to_the_leader(self):
        leader, laddr = self.serve((200, {}, {"id": 7, "state": "PENDING"}))
        follower, faddr = self.serve((307, {"Location": laddr + "/v1/jobs/7/release"}, {}))
        troupe.Client(faddr, token="loopback-ok", timeout=5).release(7, request_id="r1")
        self.assertEqual([s[:3] for s in follower.seen + leader.seen],
                         [("POST", "/v1/jobs/7/release", "r1"), ("POST", "/v1/jobs/7/release", "r1")])
        self.assertEqual(leader.seen[0][3], "Bearer loopback-ok")

    def test_unknown_outcome_and_errors(self):
        _, addr = self.serve((504, {"X-Troupe-Outcome": "unknown"}, {"error": "outcome unknown: leader lost office"}),
                             (403, {}, {"error": "permission denied: job 7 belongs to bob"}))
        c = troupe.Client(addr, token="", timeout=5)
        with self.assertRaisesRegex(troupe.UnknownOutcome, "leader lost office"):
            c.request("POST", "/v1/tokens", body={})  # no request id: not retried
        with self.assertRaises(troupe.Forbidden) as cm:
            c.kill(7)
        self.assertEqual((cm.exception.status, cm.exception.message), (403, "permission denied: job 7 belongs to bob"))

    def test_read_waits_for_the_last_write(self):
        """A peer behind the client's last write (index 10) is not
        believed, its 404 neither; the read carries the write's index."""
        _, addr = self.serve((200, {"X-Troupe-Index": "10"}, {"id": 7, "state": "CANCELLED"}),
                             *[(404, {"X-Troupe-Index": "5"}, {"error": "job 7: not found"})] * 40)
        c = troupe.Client(addr, token="", timeout=0.5)
        c.kill(7)
        self.assertEqual(c.written, 10)
        with self.assertRaisesRegex(troupe.Behind, "before this client's last write"):
            c.get(7)
        srv, addr = self.serve((201, {"X-Troupe-Index": "10"}, {"job_id": 7, "partition": "batch"}),
                               (404, {"X-Troupe-Index": "9"}, {"error": "job 7: not found"}),
                               (200, {"X-Troupe-Index": "10"}, {"id": 7, "state": "PENDING"}))
        c = troupe.Client(addr, token="", timeout=5)
        c.submit({"name": "x"})
        self.assertEqual(c.get(7)["state"], "PENDING")
        self.assertEqual([s[1] for s in srv.seen[1:]], ["/v1/jobs/7?index=9&wait=2000ms"] * 2)


@unittest.skipUnless(os.environ.get("TROUPE_ADDR"), "needs a schedd at $TROUPE_ADDR (go test ./contrib/python/ starts one)")
class ServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = troupe.Client()
        cls.dir = tempfile.mkdtemp(prefix="troupe-py-")
        os.chmod(cls.dir, 0o777)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def submit(self, script, **kw):
        return self.c.submit(job_file(script, kw.pop("name", "py")), cwd=self.dir, **kw)["job_id"]

    def test_submit_wait_completed(self):
        res = self.c.submit(job_file("echo hello from troupe"), cwd=self.dir)
        self.assertIn("partition", res)
        job = self.c.wait(res["job_id"], timeout=120)
        self.assertEqual(job["state"], "COMPLETED", job)
        self.assertEqual(job["exit_code"], 0)
        self.assertIn("hello from troupe", self.c.output(res["job_id"]))
        path = self.c.output_path(job)
        self.assertEqual(path, os.path.join(self.dir, "troupe-%d.main1.out" % job["id"]))
        hist = self.c.history(id=res["job_id"])
        self.assertEqual([(h["id"], h["state"]) for h in hist], [(res["job_id"], "COMPLETED")])
        self.assertEqual([e["event"] for e in hist[0]["events"]], ["submitted", "started", "ended"])

    def test_submit_dict_and_failure(self):
        spec = {"name": "dict", "image": "host", "command": ["/bin/sh", "-c", "exit 3"],
                "cluster": {"size": 1, "mode": "single-node"}, "resources": {"cpu": 0.1, "memory": 64 << 20}}
        jid = self.c.submit(spec, cwd=self.dir)["job_id"]
        job = self.c.wait(jid, timeout=120)
        self.assertEqual((job["state"], job["exit_code"]), ("FAILED", 3), job)

    def test_vars(self):
        text = ('variable "msg" { default = "x" }\n'
                'job "vars" {\n  image   = "host"\n  command = ["/bin/sh", "-c", "echo ${var.msg}"]\n'
                '  resources {\n    cpu    = 0.1\n    memory = "64MiB"\n  }\n}\n')
        jid = self.c.submit(text, vars={"msg": "from-vars"}, cwd=self.dir)["job_id"]
        self.assertEqual(self.c.wait(jid, timeout=120)["state"], "COMPLETED")
        self.assertIn("from-vars", self.c.output(jid))

    def test_list_filters(self):
        done = self.submit("true", name="listed-done")
        self.c.wait(done, timeout=120)
        held = self.submit("true", name="listed-held", hold=True)
        ids = lambda jobs: {j["id"] for j in jobs}
        self.assertIn(held, ids(self.c.list(state="HELD")))
        self.assertNotIn(done, ids(self.c.list(state="held")))
        self.assertIn(done, ids(self.c.list(state=["COMPLETED", "HELD"])))
        self.assertNotIn(done, ids(self.c.list(ended=False)))
        self.assertIn(held, ids(self.c.list(ended=False)))
        me = self.c.get(held)["user"]
        self.assertTrue({done, held} <= ids(self.c.list(user=me)))
        self.assertEqual(self.c.list(user="no-such-user-" + secrets.token_hex(4)), [])
        self.assertEqual(ids(self.c.list(after=done, limit=1, user=me)), {min(j for j in ids(self.c.list(user=me)) if j > done)})
        partition = self.c.get(held)["partition"]
        self.assertIn(held, ids(self.c.list(partition=partition)))
        self.assertEqual(self.c.list(partition="no-such-partition"), [])
        with self.assertRaisesRegex(troupe.BadRequest, 'state "NOPE" is not a job state'):
            self.c.list(state="NOPE")
        self.c.kill(held)

    def test_kill(self):
        jid = self.submit("sleep 300", name="to-kill")
        self.c.wait(jid, timeout=120, states={"RUNNING"})
        rid = secrets.token_hex(8)
        first = self.c.kill(jid, request_id=rid)
        self.assertTrue(first["cancelled"])
        again = self.c.kill(jid, request_id=rid)  # the same request: applied once, answered again
        self.assertEqual(again["id"], jid)
        job = self.c.wait(jid, timeout=120)
        self.assertEqual(job["state"], "CANCELLED", job)

    def test_hold_release(self):
        jid = self.submit("true", name="held", hold=True)
        self.assertEqual(self.c.get(jid)["state"], "HELD")
        with self.assertRaises(troupe.Conflict) as cm:
            self.c.hold(jid)
        self.assertEqual(cm.exception.status, 409)
        self.c.release(jid)
        self.assertEqual(self.c.wait(jid, timeout=120)["state"], "COMPLETED")

    def test_bad_job_file(self):
        text = 'job "bad" {\n  image   = "host"\n  command = ["true"]\n  cluster { size = -2 }\n}\n'
        with self.assertRaises(troupe.BadRequest) as cm:
            self.c.submit(text, source="bad.hcl", cwd=self.dir)
        self.assertEqual(cm.exception.status, 400)
        self.assertRegex(cm.exception.message, r"bad\.hcl:4:\d+: ")
        with self.assertRaisesRegex(troupe.BadRequest, r"job\.hcl:2:"):
            self.c.submit('job "x" {\n  image = = \n}\n', cwd=self.dir)

    def test_idempotent_submit(self):
        rid = secrets.token_hex(16)
        a = self.c.submit(job_file("true"), cwd=self.dir, request_id=rid)
        b = self.c.submit(job_file("true"), cwd=self.dir, request_id=rid)
        self.assertEqual(a["job_id"], b["job_id"])

    def test_not_found(self):
        with self.assertRaisesRegex(troupe.NotFound, "job 999999"):
            self.c.get(999999)

    def test_wait_timeout(self):
        jid = self.submit("true", name="never", hold=True)
        with self.assertRaises(troupe.WaitTimeout) as cm:
            self.c.wait(jid, timeout=1)
        self.assertEqual(cm.exception.job["state"], "HELD")
        self.c.kill(jid)

    def test_examples(self):
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

        def run(name, *args, code=0):
            env = dict(os.environ, PYTHONPATH=here)
            p = subprocess.run([sys.executable, os.path.join(here, "examples", name)] + [str(a) for a in args],
                               cwd=self.dir, env=env, capture_output=True, text=True, timeout=180)
            self.assertEqual(p.returncode, code, "%s %s: %s%s" % (name, args, p.stdout, p.stderr))
            return p.stdout + p.stderr

        path = os.path.join(self.dir, "example.hcl")
        with open(path, "w") as f:
            f.write('variable "word" { default = "x" }\n' + job_file("echo said ${var.word}; exit 4", name="example")
                    .replace(json.dumps("echo said ${var.word}; exit 4"), '"echo said ${var.word}; exit 4"'))
        out = run("submit.py", path, "-var", "word=hello")
        jid = int(out.split("<")[1].split(">")[0])
        self.assertIn("FAILED, exit code 4", run("wait.py", jid, "--timeout", "120", code=4))
        self.assertIn("said hello", run("logs.py", jid))
        self.assertRegex(run("list.py", "-s", "FAILED"), r"(?m)^%d\s+\S+\s+FAILED\s" % jid)
        self.assertIn("kill: job %d: already ended (FAILED)" % jid, run("kill.py", jid, code=1))
        with open(path, "w") as f:
            f.write('job "x" {\n  image = "host"\n  bogus = 1\n}\n')
        self.assertRegex(run("submit.py", path, code=1), r"example\.hcl:3:")

    def test_api_document_and_cluster(self):
        doc = self.c.openapi()
        self.assertTrue(doc["openapi"].startswith("3."))
        self.assertIn("/v1/jobs", doc["paths"])
        self.assertTrue(self.c.nodes())
        self.assertTrue(self.c.partitions())


@unittest.skipUnless(os.environ.get("TROUPE_TEST_HTTPS"), "needs schedd's https address in $TROUPE_TEST_HTTPS and its CA in $TROUPE_TEST_CA")
class HTTPSTest(unittest.TestCase):
    """The same API over TCP: TLS with schedd's CA, a bearer token."""

    def test_token_over_https(self):
        https, ca = os.environ["TROUPE_TEST_HTTPS"], os.environ["TROUPE_TEST_CA"]
        admin = troupe.Client()  # the unix socket: root is an administrator
        tok = admin.create_token(user="root")
        self.assertTrue(tok["secret"])
        c = troupe.Client(https, token=tok["secret"], ca=ca, timeout=10)
        d = tempfile.mkdtemp(prefix="troupe-py-tls-")
        try:
            jid = c.submit(job_file("echo over tls"), cwd=d)["job_id"]
            job = c.wait(jid, timeout=120)
            self.assertEqual(job["state"], "COMPLETED", job)
            self.assertIn(jid, {j["id"] for j in c.list(state="COMPLETED")})
        finally:
            shutil.rmtree(d, ignore_errors=True)
        with self.assertRaisesRegex(troupe.Unauthorized, "bearer token"):
            troupe.Client(https, token="not-a-token", ca=ca, timeout=10).list()
        with self.assertRaisesRegex(troupe.TroupeError, "TROUPE_CA"):
            troupe.Client(https, token=tok["secret"], ca="", timeout=10).list()
        admin.revoke_token(tok["id"])
        with self.assertRaisesRegex(troupe.Unauthorized, "unknown or revoked"):
            c.list()


if __name__ == "__main__":
    unittest.main()
