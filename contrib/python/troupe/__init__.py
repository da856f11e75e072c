"""A client for schedd's /v1 API, troupe's batch scheduler.

Standard library only. It finds schedd the way the troupe commands do:

* the address: the ``address`` argument, else ``$TROUPE_ADDR``, else
  ``unix:///run/troupe/schedd.sock``. An address is ``unix:///path``,
  ``/path`` (a unix socket), ``https://host:port``, ``host:port`` (https)
  or ``http://host:port`` (clear text), or a comma-separated list of TCP
  addresses (the peers of a replicated schedd), tried in turn;
* the bearer token, sent to TCP addresses only: the ``token`` argument,
  else ``$TROUPE_TOKEN``, else the first line of ``~/.troupe/token``. It
  is never sent in clear text to another host;
* the CA that signed schedd's certificate: the ``ca`` argument, else
  ``$TROUPE_CA``, besides the system's;
* the overall limit of one call: the ``timeout`` argument (seconds),
  else ``$TROUPE_TIMEOUT`` (a duration such as ``60s``), else 60 s.

Over the unix socket the kernel tells schedd who you are; over TCP the
token does. schedd refuses what you may not do with an ``APIError``
carrying its message (``Forbidden``, ``NotFound``, ...).

Writes are safe to retry: a submission carries a request id, and kill,
hold, release and signal send one in the ``X-Troupe-Request`` header, the
same on every try, so schedd applies each once. When an answer is lost
the client tries again with the same id; ``UnknownOutcome`` means it
could not find out whether the write took effect.

A client reads its own writes: it keeps the state index its last write
was answered at (``X-Troupe-Index``), and every read of the state it
sends afterwards (a job, the job list, the history, the nodes, the
partitions) asks for that index, so that the peer answering, a follower
still catching up too, answers from a state that holds the write or
leaves the read to the next peer. ``Behind`` means none had applied it
within the client's timeout.

The API itself is documented by schedd at ``GET /v1/openapi.json``
(``Client.openapi()``) and in docs/api.md.
"""

import http.client
import json
import os
import re
import secrets
import socket
import ssl
import time
import urllib.parse

__all__ = [
    "Client", "TroupeError", "APIError", "BadRequest", "QueueFull", "Unauthorized", "Forbidden",
    "NotFound", "Conflict", "Unreachable", "UnknownOutcome", "WaitTimeout", "Behind",
    "TERMINAL_STATES", "DEFAULT_ADDR",
]

DEFAULT_ADDR = "unix:///run/troupe/schedd.sock"
DEFAULT_TIMEOUT = 60.0
TERMINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED"})
DEFAULT_OUTPUT = "troupe-%j.%h.out"

_REQUEST_HEADER = "X-Troupe-Request"
_INDEX_HEADER = "X-Troupe-Index"
_OUTCOME_HEADER = "X-Troupe-Outcome"
_BLOCK_WAIT = 30.0  # seconds a blocking query waits at most per call
_TRY_TIMEOUT = 5.0  # seconds one try may take, a blocking query's wait on top
_CATCH_UP_WAIT = 2.0  # seconds a peer may take to apply our last write before we ask the next
# The reads that answer the replicated state at an index (X-Troupe-Index)
# a blocking query waits on; /v1/jobs/N is one job.
_STATE_READS = ("/v1/jobs", "/v1/history", "/v1/nodes", "/v1/partitions", "/v1/fairshare")


class TroupeError(Exception):
    """Base of the errors this client raises."""


class APIError(TroupeError):
    """A non-2xx answer from schedd: ``status``, schedd's ``message``, and
    ``outcome`` ("not-applied", "unknown" or None) for writes."""

    def __init__(self, status, message, outcome=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.outcome = outcome

    def __str__(self):
        return self.message


class BadRequest(APIError):
    """400: a bad parameter, body or job; the message names the place."""


class QueueFull(BadRequest):
    """429: a queue limit (max_queued_per_user, max_queued) is reached;
    the message names it. The same submission may succeed once jobs
    leave the queue. A BadRequest, as schedd answered it before 429."""


class Unauthorized(APIError):
    """401: over TCP, the bearer token is missing, unknown or revoked."""


class Forbidden(APIError):
    """403: the caller may not do this."""


class NotFound(APIError):
    """404: no such job, node or token."""


class Conflict(APIError):
    """409: the job is not in a state that allows this."""


class UnknownOutcome(APIError):
    """A write may or may not have taken effect (its answer was lost, or
    schedd could not tell). Look (get, list) before sending a new one."""


class Unreachable(TroupeError):
    """No address answered; nothing was applied."""


class Behind(TroupeError):
    """No peer answered from a state that holds this client's last write
    within the client's timeout (followers still catching up, or cut off
    from the leader): a read that would have answered from an older state
    raises this rather than answer."""


class WaitTimeout(TroupeError, TimeoutError):
    """wait() gave up; ``job`` is the job as last seen."""

    def __init__(self, message, job):
        super().__init__(message)
        self.job = job


_ERRORS = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 429: QueueFull}


def parse_duration(s):
    """Seconds in a Go duration such as "60s", "1m30s", "500ms"."""
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", s)
    if not parts or "".join(n + u for n, u in parts) != s.strip():
        raise ValueError("%r: want a duration such as 60s" % s)
    return sum(float(n) * units[u] for n, u in parts)


def _go_duration(seconds):
    return "%dms" % max(0, int(seconds * 1000))


def _index(hdrs):
    """The answer's state index (X-Troupe-Index), None when it has none."""
    try:
        return int(hdrs.get(_INDEX_HEADER, ""))
    except ValueError:
        return None


def _state_read(path):
    """Whether a GET of path answers the replicated state at an index."""
    if path in _STATE_READS:
        return True
    rest = path[len("/v1/jobs/"):] if path.startswith("/v1/jobs/") else ""
    return bool(rest) and "/" not in rest


def _loopback(host):
    return host in ("localhost", "::1") or host.startswith("127.")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("schedd", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


class _Base:
    """One address: how to open a connection to it."""

    def __init__(self, kind, host=None, port=None, path=None):
        self.kind, self.host, self.port, self.path = kind, host, port, path

    @classmethod
    def parse(cls, addr):
        if addr.startswith("unix://") or addr.startswith("/"):
            return cls("unix", path=addr[len("unix://"):] if addr.startswith("unix://") else addr)
        if "://" in addr and not addr.startswith(("http://", "https://")):
            raise ValueError("schedd address %r: want unix://, https:// or http://" % addr)
        if "://" not in addr:
            addr = "https://" + addr  # TLS unless http:// says otherwise
        u = urllib.parse.urlsplit(addr.rstrip("/"))
        return cls(u.scheme, host=u.hostname, port=u.port)

    def __str__(self):
        if self.kind == "unix":
            return "unix://" + self.path
        host = "[%s]" % self.host if ":" in (self.host or "") else self.host
        return "%s://%s%s" % (self.kind, host, ":%d" % self.port if self.port else "")

    def connect(self, timeout, context):
        if self.kind == "unix":
            return _UnixConnection(self.path, timeout)
        if self.kind == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=context)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)


class Client:
    """A connection to schedd. See the module's documentation for how it
    finds the address, the token and the CA."""

    def __init__(self, address=None, token=None, ca=None, timeout=None):
        self.address = address or os.environ.get("TROUPE_ADDR") or DEFAULT_ADDR
        addrs = [a.strip() for a in self.address.split(",") if a.strip()]
        if not addrs:
            raise ValueError("empty schedd address")
        self._bases = [_Base.parse(a) for a in addrs]
        if len(self._bases) > 1 and any(b.kind == "unix" for b in self._bases):
            raise ValueError("schedd address %r: a unix socket cannot be part of an address list" % self.address)
        self._cur = 0
        # The state index of this client's last write (X-Troupe-Index of
        # its answer): the reads of the state wait for a peer holding it.
        self.written = 0
        if token is None:
            token = os.environ.get("TROUPE_TOKEN", "")
        if not token:
            try:
                with open(os.path.join(os.path.expanduser("~"), ".troupe", "token")) as f:
                    token = f.readline().strip()
            except OSError:
                token = ""
        self.token = token
        if timeout is None:
            env = os.environ.get("TROUPE_TIMEOUT")
            timeout = parse_duration(env) if env else DEFAULT_TIMEOUT
        self.timeout = float(timeout)
        ca = ca if ca is not None else os.environ.get("TROUPE_CA", "")
        self._ssl = ssl.create_default_context()
        if ca:
            self._ssl.load_verify_locations(cafile=ca)

    # -- transport ---------------------------------------------------------

    def request(self, method, path, query=None, body=None, request_id=None, wait=0.0, raw=False):
        """Sends one call and returns (decoded answer, X-Troupe-Index or 0).

        body is JSON-encoded. A call that got no answer (connection
        refused or reset, no leader yet) is tried again, at the next
        address of a list, until the client's timeout; a write whose
        answer was lost is sent again only with a request id. A read of
        the state after a write of this client waits for a peer that has
        applied the write (``written``), the next peer's turn when one
        has not within a moment; ``Behind`` when none has by the timeout.
        """
        write = method != "GET"
        floor = 0
        if not write and self.written and _state_read(path):
            floor = self.written
            query = dict(query or {})
            # schedd answers a blocking query once its state index passes
            # the one asked for: just before the write's.
            if int(query.get("index") or 0) < floor - 1:
                query["index"] = str(floor - 1)
                if not wait:
                    wait = _CATCH_UP_WAIT
                    query["wait"] = _go_duration(wait)
        target = path
        if query:
            target += "?" + urllib.parse.urlencode(query, doseq=True)
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if request_id:
            headers[_REQUEST_HEADER] = request_id
        deadline = time.monotonic() + self.timeout + wait
        base = self._bases[self._cur]
        last = None
        sent = False  # a write reached a server and its answer was lost
        redirects = 0
        while True:
            try:
                status, hdrs, payload = self._try(base, method, target, data, headers, wait)
            except ssl.SSLCertVerificationError as e:
                raise TroupeError("%s: %s (set $TROUPE_CA or ca= to the CA that signed schedd's certificate)" % (base, e)) from e
            except (OSError, http.client.HTTPException) as e:
                # ConnectionRefusedError and friends: nothing was sent.
                lost = not isinstance(e, (ConnectionRefusedError, FileNotFoundError, socket.gaierror))
                if write and lost and not request_id:
                    raise UnknownOutcome(0, "%s %s to %s: %s; the write may or may not have taken effect" % (method, path, base, e), "unknown")
                sent = sent or (write and lost)
                last = "%s: %s" % (base, e)
                if time.monotonic() >= deadline:
                    if sent:
                        raise UnknownOutcome(0, "%s %s: no answer within %.0fs (%s); it may have taken effect" % (method, path, self.timeout, last), "unknown")
                    raise Unreachable("cannot reach schedd at %s (%s)" % (self.address, last))
                self._cur = (self._cur + 1) % len(self._bases)
                base = self._bases[self._cur]
                time.sleep(0.2)
                continue
            if status in (301, 302, 303, 307, 308):
                loc = hdrs.get("Location", "")
                u = urllib.parse.urlsplit(loc)
                redirects += 1
                if redirects > 5:
                    raise TroupeError("%s %s: more than 5 redirects (the last to %s)" % (method, path, loc))
                if u.scheme not in ("http", "https") or not u.hostname:
                    raise TroupeError("%s %s: redirect to %r" % (method, path, loc))
                base = _Base(u.scheme, host=u.hostname, port=u.port)
                target = u.path + ("?" + u.query if u.query else "")
                continue
            if status == 503 and time.monotonic() < deadline and (not write or request_id or hdrs.get(_OUTCOME_HEADER) == "not-applied"):
                time.sleep(float(hdrs.get("Retry-After", "1") or 1))  # an election, a replaying peer
                continue
            if status == 504 and hdrs.get(_OUTCOME_HEADER) == "unknown" and request_id and time.monotonic() < deadline:
                time.sleep(0.5)  # the same request id again: applied at most once
                continue
            answered = _index(hdrs)
            if floor and (200 <= status < 300 or status == 404) and answered is not None and answered < floor:
                # A follower that has not applied our last write yet: its
                # answer (a 404 too) is of an older state. Ask the next.
                last = "%s answered from state index %d, before this client's last write (index %d)" % (base, answered, floor)
                if time.monotonic() >= deadline:
                    raise Behind("%s %s: no peer caught up with this client's last write within %.0fs (%s)" % (method, path, self.timeout, last))
                self._cur = (self._cur + 1) % len(self._bases)
                base = self._bases[self._cur]
                time.sleep(0.2)
                continue
            try:
                value = payload if raw else json.loads(payload or b"null")
            except ValueError:
                value = payload.decode("utf-8", "replace")
            if status >= 300:
                msg = value.get("error") if isinstance(value, dict) else None
                msg = msg or "%s %s: HTTP %d %s" % (method, path, status, str(value)[:200])
                outcome = hdrs.get(_OUTCOME_HEADER)
                if outcome == "unknown":
                    raise UnknownOutcome(status, msg, outcome)
                raise _ERRORS.get(status, APIError)(status, msg, outcome)
            if write and answered:
                self.written = max(self.written, answered)
            return value, answered or 0

    def _try(self, base, method, target, data, headers, wait):
        hdrs = dict(headers)
        if self.token and base.kind != "unix":
            if base.kind == "http" and not _loopback(base.host):
                raise TroupeError("refusing to send a token over plain http to %s: use https:// (schedd --tls-cert) or a unix socket" % base)
            hdrs["Authorization"] = "Bearer " + self.token
        conn = base.connect(_TRY_TIMEOUT + wait, self._ssl)
        try:
            conn.request(method, target, body=data, headers=hdrs)
            resp = conn.getresponse()
            return resp.status, resp.headers, resp.read()
        finally:
            conn.close()

    # -- jobs --------------------------------------------------------------

    def submit(self, job, vars=None, source=None, cwd=None, hold=False, depends_on=None, request_id=None):
        """Submits a job; returns {"job_id": N, "partition": P}.

        job is a job file's text (str; schedd parses it and names errors
        as source:line:col) or a parsed job (dict, the JobSpec of the API
        document). vars set the file's variables (bsub -var). cwd is the
        submit directory (default: this process's); relative output
        paths resolve there. depends_on is a Dependency dict such as
        {"conditions": [{"kind": "done", "job_id": 12}]}.
        """
        req = {"cwd": cwd or os.getcwd(), "request_id": request_id or secrets.token_hex(16)}
        if isinstance(job, str):
            req["job_file"] = job
            req["source"] = source or "job.hcl"
        elif isinstance(job, dict):
            req["spec"] = job
            if source:
                req["source"] = source
        else:
            raise TypeError("job: want a job file's text (str) or a job (dict), not %s" % type(job).__name__)
        if vars:
            req["vars"] = {k: str(v) for k, v in vars.items()}
        if hold:
            req["hold"] = True
        if depends_on:
            req["depends_on"] = depends_on
        res, _ = self.request("POST", "/v1/jobs", body=req, request_id=req["request_id"])
        return res

    def submit_file(self, path, **kw):
        """Submits the job file at path (its name in error messages)."""
        with open(path) as f:
            text = f.read()
        kw.setdefault("source", path)
        return self.submit(text, **kw)

    def get(self, job_id, index=None, wait=None):
        """The job. With index (from a previous answer's "modify_index" or
        the list's "index") waits up to wait seconds for a change."""
        job, _ = self._blocking("/v1/jobs/%d" % int(job_id), {}, index, wait)
        return job

    def list(self, user=None, partition=None, state=None, ended=None, after=None, limit=None):
        """The jobs schedd filters: user, partition and state each a str or
        a list; ended=False leaves ended jobs out; after and limit page
        through the queue in id order. Returns the list of jobs."""
        return self.list_page(user=user, partition=partition, state=state, ended=ended, after=after, limit=limit)["jobs"]

    def list_page(self, user=None, partition=None, state=None, ended=None, after=None, limit=None, index=None, wait=None):
        """list() with the answer's state index: {"jobs": [...], "index": N}."""
        q = {}
        for key, val in (("user", user), ("partition", partition), ("state", state)):
            if val is not None:
                q[key] = [val] if isinstance(val, str) else list(val)
        if ended is not None:
            q["ended"] = "true" if ended else "false"
        if after is not None:
            q["after"] = str(int(after))
        if limit is not None:
            q["limit"] = str(int(limit))
        res, _ = self._blocking("/v1/jobs", q, index, wait)
        return res

    def wait(self, job_id, timeout=None, states=TERMINAL_STATES):
        """Waits until the job is in one of states (by default: ended) and
        returns it; raises WaitTimeout after timeout seconds (None: no
        limit). Uses blocking queries: no polling interval to pick."""
        end = None if timeout is None else time.monotonic() + timeout
        index = 0
        missing = None
        while True:
            left = _BLOCK_WAIT if end is None else min(_BLOCK_WAIT, end - time.monotonic())
            try:
                job, index = self._blocking("/v1/jobs/%d" % int(job_id), {}, index, max(left, 0.0))
            except NotFound:
                # A follower that has not applied a job just submitted
                # yet: ask the next peer for a while before believing it.
                missing = missing or time.monotonic()
                if len(self._bases) == 1 or time.monotonic() - missing > 10:
                    raise
                self._cur, index = (self._cur + 1) % len(self._bases), 0
                time.sleep(0.2)
                continue
            missing = None
            if job["state"] in states:
                return job
            if end is not None and time.monotonic() >= end:
                raise WaitTimeout("job %d is still %s after %gs" % (job["id"], job["state"], timeout), job)

    def kill(self, job_id, done=False, request_id=None):
        """Cancels the job (done=True: records it COMPLETED, bkill -d)."""
        return self._control(job_id, "kill", {"done": "true"} if done else None, None, request_id)

    def hold(self, job_id, request_id=None):
        """A PENDING job becomes HELD; Conflict otherwise."""
        return self._control(job_id, "hold", None, None, request_id)

    def release(self, job_id, request_id=None):
        """A HELD job becomes PENDING; Conflict otherwise."""
        return self._control(job_id, "release", None, None, request_id)

    def signal(self, job_id, signal, host=None, request_id=None):
        """Sends signal (a name such as "USR1" or a number) to the job's
        containers, or to host alone."""
        body = {"signal": str(signal)}
        if host:
            body["host"] = host
        return self._control(job_id, "signal", None, body, request_id)

    def _control(self, job_id, what, query, body, request_id):
        rid = request_id or secrets.token_hex(16)
        job, _ = self.request("POST", "/v1/jobs/%d/%s" % (int(job_id), what), query=query,
                              body=body if body is not None else {}, request_id=rid)
        return job

    def _blocking(self, path, query, index, wait):
        q = dict(query)
        w = 0.0
        if index:
            w = _BLOCK_WAIT if wait is None else max(0.0, float(wait))
            q["index"] = str(int(index))
            q["wait"] = _go_duration(w)
        return self.request("GET", path, query=q, wait=w)

    # -- output ------------------------------------------------------------

    @staticmethod
    def output_path(job, host="main1", error=False):
        """Where the job's container host writes its output (error=True:
        its error file; None when stderr goes to the output file), as
        bpeek finds it: the job's pattern (%j id, %h host, %u user),
        relative to the job's submit directory."""
        spec = job.get("spec", {})
        pattern = spec.get("error") if error else (spec.get("output") or DEFAULT_OUTPUT)
        if not pattern:
            return None
        subst = {"j": str(job["id"]), "h": host, "u": job.get("user", ""), "%": "%"}
        out, i = [], 0
        while i < len(pattern):
            c = pattern[i]
            if c == "%" and i + 1 < len(pattern) and pattern[i + 1] in subst:
                out.append(subst[pattern[i + 1]])
                i += 2
                continue
            out.append(c)
            i += 1
        p = "".join(out)
        if os.path.isabs(p):
            return os.path.normpath(p)
        cwd = job.get("cwd", "")
        if not os.path.isabs(cwd):
            raise TroupeError("job %d: output %r is relative and the job shows no submit directory (only its owner or an admin sees it)" % (job["id"], p))
        return os.path.join(cwd, p)

    def output(self, job_id, host="main1", error=False):
        """The job's output so far, read from its file as bpeek does: on a
        host that shares the job's submit directory, as a user who may
        read it. The API itself does not carry output."""
        path = self.output_path(self.get(job_id), host, error)
        if path is None:
            return ""
        with open(path, errors="replace") as f:
            return f.read()

    # -- the rest of the API -----------------------------------------------

    def history(self, **filters):
        """Ended jobs with usage and events (bhist). Filters: user,
        account, partition, state, id (each a value or a list),
        submitted_from, submitted_to, ended_from, ended_to (RFC 3339),
        limit."""
        q = {k: (list(v) if isinstance(v, (list, tuple, set)) else [str(v)]) for k, v in filters.items() if v is not None}
        res, _ = self.request("GET", "/v1/history", query=q)
        return res["jobs"]

    def nodes(self):
        res, _ = self.request("GET", "/v1/nodes")
        return res["nodes"]

    def partitions(self):
        res, _ = self.request("GET", "/v1/partitions")
        return res["partitions"]

    def create_token(self, user=None, admin=False):
        """Issues a bearer token (badmin token create): for the caller, or
        (administrators) for user, admin if asked. The answer's "secret"
        is shown this once."""
        body = {}
        if user:
            body["user"] = user
        if admin:
            body["admin"] = True
        res, _ = self.request("POST", "/v1/tokens", body=body)
        return res

    def tokens(self):
        """The tokens the caller may see, without their secrets."""
        res, _ = self.request("GET", "/v1/tokens")
        return res["tokens"]

    def revoke_token(self, token_id):
        self.request("POST", "/v1/tokens/%s/revoke" % urllib.parse.quote(token_id, safe=""), body={})

    def openapi(self):
        """schedd's OpenAPI 3 document of this API."""
        res, _ = self.request("GET", "/v1/openapi.json")
        return res
