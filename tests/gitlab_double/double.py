"""The GitLab test double: a strict fake of the GitLab runner API on loopback.

Why it exists: the C agent must be a drop-in for gitlab-runner, so the
integration tests need a GitLab that (a) answers like Rails does, including
its rejections, (b) can be told to misbehave (429 storms, dropped
connections, slow answers) and (c) notices when the *client* breaks the
protocol (token in the wrong header, missing X-Request-Id, ...), so a test
can assert there were no violations.  The wire facts come from
docs/protocol.md (sections 1, 2, 3.1, 4.1-4.4, 5, 6.1-6.3, 13).

Layout of this module, top to bottom:

- records: Headers, Request, Runner, Rule, Response;
- routing: the @endpoint decorator and Route (one endpoint = one method);
- GitLabDouble: state, scripting, records, lifecycle, then the one place
  where requests are validated (_check), then the endpoints;
- the HTTP plumbing: _Handler (framing, writing, dropping) and _Server
  (threads, TLS handshake per connection, connection accounting).

Jobs (PUT /jobs/:id, PATCH /jobs/:id/trace, job state helpers) live in
jobs.py, artifacts (upload, download, the object storage a direct
download goes to) in artifacts.py, job payloads in payloads.py,
Workhorse's long polling of the job request in workhorse.py;
GitLabDouble inherits all but payloads.py.

Threading: one thread per connection (ThreadingHTTPServer).  Every record
and every piece of state is guarded by one lock; endpoints run under it and
never sleep, so they see a consistent state.  Delays happen outside it;
long-poll holds wait on a Condition of that lock (which releases it).
"""
import http.server
import json
import re
import secrets
import socket
import socketserver
import ssl
import string
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, Optional
from urllib.parse import unquote, unquote_plus, urlsplit

API_PREFIX = "/api/v4"
IDLE_TIMEOUT = 30.0        # keep-alive connections idle longer than this are closed
HANDSHAKE_TIMEOUT = 5.0    # a TLS client that stalls the handshake is dropped
JOIN_TIMEOUT = 2.0         # stop() waits at most this long per connection thread

REQUEST_ID_RE = re.compile(r"^[0-9a-f]{32}$")
SYSTEM_ID_RE = re.compile(r"^[sr]_[0-9a-zA-Z]{12}$")
USER_AGENT_PREFIX = "runner "
ACTIONS = (None, "drop", "drop_after_headers", "drop_after_handling", "drop_mid_body",
           "short_content_length", "bad_content_length", "echo_html")
_ALNUM = string.ascii_letters + string.digits


# ---------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------

class Headers(Mapping):
    """Case-insensitive, order-keeping header map (duplicates kept, get_all)."""

    def __init__(self, pairs=()):
        self._pairs = [(str(k), str(v)) for k, v in pairs]

    def __getitem__(self, name):
        low = name.lower()
        for k, v in self._pairs:
            if k.lower() == low:
                return v
        raise KeyError(name)

    def get_all(self, name):
        low = name.lower()
        return [v for k, v in self._pairs if k.lower() == low]

    def __iter__(self):
        seen = []
        for k, _ in self._pairs:
            if k.lower() not in (s.lower() for s in seen):
                seen.append(k)
        return iter(seen)

    def __len__(self):
        return len(list(iter(self)))

    def items(self):
        """Every (name, value) pair as received, duplicates included."""
        return list(self._pairs)

    def __repr__(self):
        return f"Headers({self._pairs!r})"


@dataclass
class Request:
    """One request as the double received it, and what it answered.

    response_status is None while the answer is being prepared and for
    dropped connections.  complete is False when the client went away
    before sending the whole body.
    """
    method: str
    path: str
    query: str
    headers: Headers
    body: bytes
    time: float
    response_status: Optional[int] = None
    connection: int = 0
    chunked: bool = False
    complete: bool = True
    client_cert: Optional[str] = None          # subject CN of the TLS client certificate
    violations: list = field(default_factory=list)
    response_headers: Optional[Headers] = None
    response_body: Optional[bytes] = None
    held: Optional[float] = None               # seconds Workhorse's long poll held it
    hold_outcome: Optional[str] = None         # "holding", then "changed"/"timeout"/"stopped"
    answered: Optional[float] = None           # monotonic time the whole answer was written

    @property
    def target(self):
        return self.path + ("?" + self.query if self.query else "")

    def json(self):
        return json.loads(self.body)


def poll_until(predicate, timeout, interval=0.01):
    """Call predicate() until it is truthy and return its value; TimeoutError
    after timeout seconds.  The one polling loop of the tests and benchmarks:
    each caller words the failure its own way."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"not within {timeout} s")
        time.sleep(interval)


def _now():
    return datetime.now(timezone.utc)


def format_time(dt):
    """Rails' JSON time format (ISO 8601, milliseconds, Z)."""
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + \
        f"{dt.microsecond // 1000:03d}Z"


def parse_time(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass
class Runner:
    """A runner as GitLab knows it.

    system_ids holds the runner managers seen (verify and job requests
    create them, "<legacy>" when the client sent no system_id).
    queue_value is Rails' `runner:build_queue:<token>` value, the
    X-GitLab-Last-Update a job request gets back.
    """
    id: int
    token: str
    token_expires_at: Optional[str] = None
    paused: bool = False
    description: str = ""
    tag_list: list = field(default_factory=list)
    registration: Optional[dict] = None       # the POST /runners params, when registered that way
    system_ids: set = field(default_factory=set)
    queue_value: str = field(default_factory=lambda: secrets.token_hex(16))
    old_tokens: list = field(default_factory=list)
    info: Optional[dict] = None               # last `info` object the runner sent
    contacted_at: Optional[float] = None      # monotonic time of the last authenticated call

    def expired(self):
        return self.token_expires_at is not None and parse_time(self.token_expires_at) <= _now()


@dataclass
class Rule:
    """A scripted fault: applies to the next `times` matching requests.

    `times=None` means forever.  With a status the answer is replaced;
    without one the normal answer is sent (after `delay`).  `action`:
    "drop" closes the connection without answering (the endpoint does not
    run); "drop_after_headers" sends the status line, the headers with the
    full Content-Length, half the body, then closes; "drop_after_handling"
    runs the endpoint (its side effects happen) and closes without
    answering, the lost-response case; "drop_mid_body" reads about half
    of the request body and closes (the rule is taken before the body is
    read, so a predicate sees an empty body); "short_content_length" sends
    the answer's first `cut` body bytes with a Content-Length saying so, a
    body the client takes as whole; "bad_content_length" sends the whole
    body with a Content-Length of `cut`; both then close.  `cut` is a
    number or a function of the body (default: half).  "echo_html" answers
    `status` (502 without one) with an HTML error page that quotes the
    request, its headers and its body, as some proxies do.
    """
    method: str = "*"
    path: str = r".*"
    times: Optional[int] = 1
    status: Optional[int] = None
    headers: dict = field(default_factory=dict)
    body: object = None
    action: Optional[str] = None
    delay: float = 0.0
    predicate: Optional[Callable] = None
    cut: object = None
    used: int = 0
    until: Optional[float] = None             # storms: monotonic deadline instead of a count

    def matches(self, req):
        if self.until is not None:
            return time.monotonic() < self.until
        if self.times is not None and self.used >= self.times:
            return False
        if self.method != "*" and self.method.upper() != req.method:
            return False
        if not re.search(self.path, req.path):
            return False
        return self.predicate is None or bool(self.predicate(req))


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: list = field(default_factory=list)   # (name, value) pairs


def json_response(status, obj, headers=()):
    return Response(status, json.dumps(obj, separators=(",", ":")).encode(),
                    [("Content-Type", "application/json")] + list(headers))


def _echo_page(req, status):
    """An HTML error page quoting the request whole, as some proxies answer."""
    import html

    head = "".join(f"{k}: {v}\n" for k, v in req.headers.items())
    text = f"{req.method} {req.path}{'?' + req.query if req.query else ''}\n{head}\n"
    text += req.body.decode("utf-8", "replace")
    page = (f"<html><head><title>{status} Error</title></head><body><h1>{status} Error</h1>"
            f"<p>The upstream did not answer this request:</p><pre>{html.escape(text)}</pre>"
            "</body></html>")
    return Response(status, page.encode(), [("Content-Type", "text/html")])


def message(status, text):
    """GitLab's usual error shape: {"message": "..."}."""
    return json_response(status, {"message": text})


def grape_error(text):
    """Grape parameter validation failures: 400 {"error": "..."}."""
    return json_response(400, {"error": text})


def no_content(headers=()):
    return Response(204, b"", list(headers))


FORBIDDEN = "403 Forbidden"
UNAUTHORIZED = "401 Unauthorized"


# ---------------------------------------------------------------------------
# Routing: one endpoint is one method carrying its Route
# ---------------------------------------------------------------------------

# Grape parameter types (checked on the JSON body).
def STR(v): return isinstance(v, str)                                  # noqa: E302,E704
def BOOL(v): return isinstance(v, bool)                                # noqa: E302,E704
def INT(v): return isinstance(v, int) and not isinstance(v, bool)      # noqa: E302,E704
def HASH(v): return isinstance(v, dict)                                # noqa: E302,E704
def TAGS(v): return isinstance(v, str) or (                            # noqa: E302,E704
    isinstance(v, list) and all(isinstance(t, str) for t in v))


class one_of:
    def __init__(self, *values):
        self.values = values

    def __call__(self, v):
        return v in self.values


# Where the tokens of a route belong (protocol.md 1.3).
AUTH_RUNNER = "runner"            # body token + Runner-Token header equal to it
AUTH_BODY_ONLY = "body_only"      # body token; a Runner-Token header is tolerated only if equal
AUTH_RUNNER_HEADER = "header"     # Runner-Token header only, no body (discovery)
AUTH_PAT = "pat"                  # Private-Token only, no body
AUTH_JOB = "job"                  # body token + Job-Token header equal to it (PUT /jobs/:id)
AUTH_JOB_HEADER = "job_header"    # Job-Token header only (trace)
AUTH_JOB_ARTIFACTS = "job_artifacts"  # Job-Token header only; a missing one is answered
                                      # by the endpoint as Rails does (artifacts.py)
AUTH_STORAGE = "storage"          # object storage: no token at all (artifacts.py)
AUTH_NONE = "none"                # catch-all


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern
    handler: str
    auth: str
    body: Optional[str]               # "json" or None (no body expected)
    accept_json: bool                 # the client must send Accept: application/json
    params: dict                      # name -> type check
    required: tuple


def endpoint(method, path, *, auth, body="json", accept_json=False, params=None,
             required=("token",), prefix=API_PREFIX):
    """Declare a method of GitLabDouble as the endpoint for METHOD <prefix><path>.

    Validation common to every endpoint (JSON, Grape params, token
    placement) happens once in GitLabDouble._check from this declaration;
    the method only implements what Rails does after that.
    """
    def mark(fn):
        fn._route = Route(method, re.compile("^" + re.escape(prefix) + path + "$"),
                          fn.__name__, auth, body, accept_json, dict(params or {}),
                          tuple(required))
        return fn
    return mark


@dataclass
class Call:
    """A request on its way through validation to an endpoint."""
    request: Request
    route: Optional[Route]
    args: dict
    params: dict = field(default_factory=dict)
    rejection: Optional[Response] = None

    def violate(self, text, reject=None):
        self.request.violations.append(f"{self.request.method} {self.request.path}: {text}")
        if reject is not None and self.rejection is None:
            self.rejection = reject


def _double_reject(text):
    return message(400, "double: " + text)


def _random_alnum(n):
    return "".join(secrets.choice(_ALNUM) for _ in range(n))


# ---------------------------------------------------------------------------
# The double
# ---------------------------------------------------------------------------

from .artifacts import ArtifactsMixin  # noqa: E402
from .jobs import JobsMixin  # noqa: E402  (jobs.py uses the records above)
from .workhorse import STOPPED, WorkhorseMixin  # noqa: E402


class GitLabDouble(JobsMixin, ArtifactsMixin, WorkhorseMixin):
    """A strict fake GitLab (see the module docstring).

    State (mutate freely from the test thread between requests):
    registration_tokens (set), runners (id -> Runner), pats (PAT -> allowed
    bool; False means a valid PAT without the right to reset: 403),
    router_url, legacy_registration_disabled, token_expires_in (seconds of
    validity for tokens the double issues; None = never expire), long_poll
    (seconds Workhorse holds a job request whose last_update is current;
    0 = no long polling, see workhorse.py), jobs (id -> Job, see jobs.py),
    the artifact settings (max_artifact_size, artifact_redirect, ...; see
    artifacts.py).
    """

    def __init__(self, tls=None, require_client_cert=False, host="127.0.0.1",
                 idle_timeout=IDLE_TIMEOUT, long_poll=0):
        self.tls = tls
        self.require_client_cert = require_client_cert
        self.host = host
        self.port = None
        self.idle_timeout = idle_timeout

        self.registration_tokens = set()
        self.runners = {}
        self.pats = {}
        self.router_url = None
        self.legacy_registration_disabled = False
        self.token_expires_in = None
        self.listeners = []                 # callables(Request), after each answer (or drop)

        self._lock = threading.RLock()
        self._requests = []
        self._violations = []
        self._errors = []
        self._tls_failures = []
        self._tls_handshakes = 0
        self._tls_resumed = 0
        self._rules = []
        self._storm = None
        self._conns = {}
        self._conn_seq = 0
        self._max_open = 0
        self._next_runner_id = 1000
        self._stopping = threading.Event()
        self._local = threading.local()
        self._server = None
        self._thread = None
        self._routes = self._collect_routes()
        self._jobs_init()
        self._artifacts_init()
        self._workhorse_init(long_poll)

    # -- lifecycle ----------------------------------------------------------

    def start(self, port=0):
        """Bind host:port (0: any) and serve in background threads; returns self.

        After stop(), start(port=d.port) is a GitLab back from an outage:
        the same address and state (runners, jobs, records).
        """
        ctx = self._ssl_context() if self.tls else None
        self._stopping.clear()
        self._server = _Server((self.host, port), _Handler, self, ctx)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name=f"gitlab-double:{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Stop accepting, close every connection, join the threads. Idempotent."""
        if self._server is None:
            return
        self._stopping.set()
        self._notify_queue_changed()        # long-poll holds end now
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            conns = list(self._conns.values())
        for c in conns:
            c.close()
        for c in conns:
            if c.thread is not None:
                c.thread.join(JOIN_TIMEOUT)
        self._thread.join(JOIN_TIMEOUT)
        self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def url(self):
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def _ssl_context(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.tls.server_cert, self.tls.server_key)
        if self.require_client_cert:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(self.tls.ca_cert)
        return ctx

    # -- state helpers --------------------------------------------------------

    def add_runner(self, token=None, id=None, expires_at=None, paused=False, **fields):
        """Create a runner GitLab-side (as the UI does); returns its Runner record.

        expires_at: None (never) or an ISO 8601 string / aware datetime.
        """
        with self._lock:
            if id is None:
                id = self._next_runner_id
            if id in self.runners:
                raise ValueError(f"runner id {id} exists")
            self._next_runner_id = max(self._next_runner_id, id + 1)
            if isinstance(expires_at, datetime):
                expires_at = format_time(expires_at)
            r = Runner(id=id, token=token or self.new_runner_token(created=True),
                       token_expires_at=expires_at, paused=paused, **fields)
            self.runners[id] = r
            return r

    def runner(self, token):
        """The runner whose *current* token this is (expired included), or None."""
        with self._lock:
            for r in self.runners.values():
                if r.token == token:
                    return r
        return None

    def tick_queue(self, runner):
        """A job this runner could take appeared: change its queue value.

        Like Redis for Workhorse, this also releases long polls held on it.
        """
        with self._lock:
            runner.queue_value = secrets.token_hex(16)
            self._queue_changed.notify_all()

    @staticmethod
    def new_runner_token(created=True):
        """glrt- tokens for runners created in the UI/API, prefix-less for legacy ones."""
        return ("glrt-t1_" + _random_alnum(20)) if created else _random_alnum(20)

    def _issue_expiry(self):
        if self.token_expires_in is None:
            return None
        return format_time(_now() + timedelta(seconds=self.token_expires_in))

    def _secrets(self):
        """Every token value that must never appear in a URL -> what it is."""
        out = {t: "a registration token" for t in self.registration_tokens}
        out.update({t: "a personal access token" for t in self.pats})
        for r in self.runners.values():
            out.update({t: f"an old token of runner {r.id}" for t in r.old_tokens})
            out[r.token] = f"the token of runner {r.id}"
        for j in getattr(self, "jobs", {}).values():
            out[j.token] = f"the token of job {j.id}"
        return {t: what for t, what in out.items() if isinstance(t, str) and len(t) >= 6}

    # -- scripting ------------------------------------------------------------

    def script(self, method="*", path=r".*", times=1, status=None, headers=None, body=None,
               action=None, delay=0.0, predicate=None, cut=None):
        """Add a fault rule (see Rule); rules are tried in registration order."""
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; one of {ACTIONS}")
        re.compile(path)
        rule = Rule(method=method, path=path, times=times, status=status,
                    headers=dict(headers or {}), body=body, action=action, delay=delay,
                    predicate=predicate, cut=cut)
        with self._lock:
            self._rules.append(rule)
        return rule

    def storm(self, seconds, status=429, headers=None, body=None):
        """Answer every request with `status` for the next `seconds` (before any rule)."""
        with self._lock:
            self._storm = Rule(status=status, headers=dict(headers or {}), body=body,
                               times=None, until=time.monotonic() + seconds)
        return self._storm

    def clear_scripts(self):
        with self._lock:
            self._rules.clear()
            self._storm = None

    def _take_rule(self, req, early=False):
        """The rule for req; early: only drop_mid_body rules (taken before the body)."""
        with self._lock:
            if early:
                rules = [r for r in self._rules if r.action == "drop_mid_body"]
            else:
                if self._storm is not None and self._storm.matches(req):
                    self._storm.used += 1
                    return self._storm
                rules = [r for r in self._rules if r.action != "drop_mid_body"]
            for rule in rules:
                if rule.matches(req):
                    rule.used += 1
                    return rule
        return None

    @staticmethod
    def _rule_response(rule):
        headers = list(rule.headers.items())
        has_ct = any(k.lower() == "content-type" for k, _ in headers)
        if rule.status in (204, 304):
            return Response(rule.status, b"", headers)
        body = rule.body
        if body is None:
            reason = http.server.BaseHTTPRequestHandler.responses.get(rule.status, ("",))[0]
            body = {"message": f"{rule.status} {reason}".strip()}
        if isinstance(body, (dict, list)):
            body = json.dumps(body, separators=(",", ":"))
        if isinstance(body, str):
            body = body.encode()
        if not has_ct:
            headers.insert(0, ("Content-Type", "application/json"))
        return Response(rule.status, body, headers)

    # -- records --------------------------------------------------------------

    @property
    def requests(self):
        with self._lock:
            return list(self._requests)

    def requests_for(self, method, path_regex):
        with self._lock:
            return [r for r in self._requests
                    if (method == "*" or r.method == method.upper())
                    and re.search(path_regex, r.path)]

    @property
    def violations(self):
        with self._lock:
            return list(self._violations)

    @property
    def errors(self):
        """Exceptions inside the double itself (its bugs, not the client's)."""
        with self._lock:
            return list(self._errors)

    @property
    def tls_failures(self):
        """Failed TLS handshakes, as text (e.g. an unknown CA alert from the client)."""
        with self._lock:
            return list(self._tls_failures)

    @property
    def open_connections(self):
        with self._lock:
            return len(self._conns)

    @property
    def max_open_connections(self):
        with self._lock:
            return self._max_open

    @property
    def accepted_connections(self):
        """Connections accepted since start (open or closed since)."""
        with self._lock:
            return self._conn_seq

    @property
    def tls_handshakes(self):
        """Completed TLS handshakes since start (resumed sessions included)."""
        with self._lock:
            return self._tls_handshakes

    @property
    def tls_resumed(self):
        """Of tls_handshakes, those that resumed an earlier session."""
        with self._lock:
            return self._tls_resumed

    def wait_for(self, predicate, timeout=5.0, interval=0.01):
        """Poll predicate() until it is truthy; return its value or raise TimeoutError."""
        try:
            return poll_until(predicate, timeout, interval)
        except TimeoutError:
            raise TimeoutError(f"condition not met within {timeout} s; requests so far:\n"
                               + self.summary()) from None

    def summary(self):
        """One line per request, for assertion messages."""
        return "\n".join(f"  {r.method} {r.target} -> {r.response_status}"
                         for r in self.requests) or "  (none)"

    # -- the request path (called by _Handler) ---------------------------------

    def _receive(self, req):
        """Record req, validate it, pick a fault.  Returns (call, rule)."""
        call = self._check(req)
        with self._lock:
            self._requests.append(req)
            self._violations.extend(req.violations)
        return call, self._take_rule(req)

    def _answer(self, call, rule):
        """The Response for a request whose delay (if any) has passed."""
        if rule is not None and rule.status is not None:
            return self._rule_response(rule)
        if call.rejection is not None:
            return call.rejection
        if call.route is None:
            allowed = [r.method for r in self._routes if r.pattern.match(call.request.path)]
            if allowed:
                return json_response(405, {"error": "405 Not Allowed"},
                                     [("Allow", ", ".join(allowed))])
            return message(404, "404 Not Found")
        try:
            with self._lock:
                seen = len(call.request.violations)
                resp = getattr(self, call.route.handler)(call)
                # _receive recorded the validation violations; these are the
                # endpoint's own (e.g. a final update with a wrong checksum).
                self._violations.extend(call.request.violations[seen:])
                return resp
        except Exception:
            self._error(traceback.format_exc())
            return message(500, "500 Internal Server Error")

    def _finish(self, req, resp):
        """Fill in what was answered (resp None: dropped) and tell the listeners."""
        with self._lock:
            if resp is not None:
                req.response_status = resp.status
                req.response_headers = Headers(resp.headers)
                req.response_body = resp.body
        for listener in list(self.listeners):
            try:
                listener(req)
            except Exception:
                self._error(traceback.format_exc())

    def _request_id_header(self, req):
        rid = req.headers.get("X-Request-Id")
        return ("X-Request-Id", rid if rid else uuid.uuid4().hex)

    def _error(self, text):
        with self._lock:
            self._errors.append(text)

    def _conn_opened(self, conn):
        with self._lock:
            self._conn_seq += 1
            conn.id = self._conn_seq
            self._conns[conn.id] = conn
            self._max_open = max(self._max_open, len(self._conns))

    def _conn_closed(self, conn):
        with self._lock:
            self._conns.pop(conn.id, None)

    # -- validation: the one place -------------------------------------------

    @classmethod
    def _collect_routes(cls):
        routes, seen = [], set()
        for klass in reversed(cls.__mro__):
            for name, fn in vars(klass).items():
                route = getattr(fn, "_route", None)
                if route is not None and name not in seen:
                    seen.add(name)
                    routes.append(route)
        return routes

    def _route(self, method, path):
        for route in self._routes:
            m = route.pattern.match(path)
            if m and route.method == method:
                return route, m.groupdict()
        return None, {}

    def _check(self, req):
        """Validate a request; violations go on req, the first rejection wins.

        Order follows what GitLab does first: API-wide authentication
        (Private-Token -> 401), then Grape body parsing and parameter
        validation (400), then the double's own token-placement rules
        (400 "double: ...").  General client obligations (X-Request-Id,
        User-Agent, no Expect, no token in the URL) are recorded only.
        """
        route, args = self._route(req.method, req.path)
        call = Call(req, route, args)
        if route is not None and route.auth == AUTH_STORAGE:
            self._check_storage(call)       # not GitLab: none of the API's rules
            return call
        self._check_general(call)
        auth = route.auth if route else AUTH_NONE
        if auth != AUTH_PAT and req.headers.get_all("Private-Token"):
            call.violate("Private-Token header sent; only POST /runners/:id/"
                         "reset_authentication_token takes one (GitLab answers 401)",
                         message(401, UNAUTHORIZED))
        if route is None:
            return call
        if route.body == "json":
            self._check_json(call)
        elif route.body is None and req.body:
            call.violate(f"unexpected request body ({len(req.body)} bytes); "
                         "this endpoint takes none")
        self._check_tokens(call)
        if route.accept_json and "application/json" not in _media_types(
                req.headers.get("Accept", "")):
            call.violate("Accept: application/json missing (the answer is JSON)")
        return call

    def _check_general(self, call):
        req = call.request
        rid = req.headers.get_all("X-Request-Id")
        if not rid:
            call.violate("X-Request-Id header missing")
        elif len(rid) > 1:
            call.violate(f"X-Request-Id header sent {len(rid)} times")
        elif not REQUEST_ID_RE.match(rid[0]):
            call.violate(f"X-Request-Id {rid[0]!r} is not 32 lowercase hex characters")
        ua = req.headers.get("User-Agent")
        if ua is None:
            call.violate("User-Agent header missing")
        elif not ua.startswith(USER_AGENT_PREFIX):
            call.violate(f"User-Agent {ua!r} does not start with {USER_AGENT_PREFIX!r}")
        for value in req.headers.get_all("Expect"):
            call.violate(f"Expect: {value} sent (the client must never send Expect)")
        with self._lock:
            tokens = self._secrets()
        path, query = unquote(req.path), unquote_plus(req.query)
        for tok, what in sorted(tokens.items()):
            if tok in path:
                call.violate(f"{what} appears in the URL path")
            if tok in query:
                call.violate(f"{what} appears in the URL query string")
        for name in ("Runner-Token", "Job-Token", "Private-Token"):
            if len(req.headers.get_all(name)) > 1:
                call.violate(f"{name} header sent {len(req.headers.get_all(name))} times",
                             _double_reject(f"{name} header sent more than once"))

    def _check_json(self, call):
        req, route = call.request, call.route
        ctype = req.headers.get("Content-Type", "")
        if req.chunked:
            call.violate("JSON body sent chunked (Content-Length expected)")
        if _media_type(ctype) != "application/json":
            call.violate(f"Content-Type {ctype!r} on a JSON endpoint "
                         "(expected application/json)")
            params = {}     # Grape ignores a body of another type: params come out empty
        elif not req.body:
            params = {}
        else:
            try:
                params = json.loads(req.body)
            except ValueError as e:
                params = None
                detail = str(e)
            else:
                detail = "not a JSON object"
            if not isinstance(params, dict):
                call.violate(f"body is not a JSON object ({detail})",
                             grape_error("message body does not match declared format"))
                return
        call.params = params
        errors = []
        for name in route.required:
            if name not in params:
                errors.append(f"{name} is missing")
        for name, check in route.params.items():
            if name in params and params[name] is not None and not check(params[name]):
                if isinstance(check, one_of):
                    errors.append(f"{name} does not have a valid value")
                else:
                    errors.append(f"{name} is invalid")
        if errors:
            call.violate("rejected parameters: " + ", ".join(errors), grape_error(", ".join(errors)))
        sid = params.get("system_id")
        if isinstance(sid, str) and not SYSTEM_ID_RE.match(sid):
            call.violate(f"system_id {sid!r} does not match {SYSTEM_ID_RE.pattern}")

    def _check_tokens(self, call):
        req, auth = call.request, call.route.auth
        body_token = call.params.get("token")
        header = req.headers.get("Runner-Token")
        if auth in (AUTH_JOB, AUTH_JOB_HEADER, AUTH_JOB_ARTIFACTS):
            job_header = req.headers.get("Job-Token")
            if header is not None:
                call.violate("Runner-Token header on a job endpoint",
                             _double_reject("Runner-Token header on a job endpoint"))
            if job_header is None:
                call.violate("Job-Token header missing",
                             None if auth == AUTH_JOB_ARTIFACTS
                             else _double_reject("Job-Token header missing"))
            elif auth == AUTH_JOB and isinstance(body_token, str) and job_header != body_token:
                call.violate("Job-Token header differs from the body token",
                             _double_reject("Job-Token header differs from the body token"))
            return
        if req.headers.get_all("Job-Token"):
            call.violate("Job-Token header on a runner endpoint",
                         _double_reject("Job-Token header on a runner endpoint"))
        if auth == AUTH_RUNNER:
            if header is None:
                call.violate("Runner-Token header missing",
                             _double_reject("Runner-Token header missing"))
            elif isinstance(body_token, str) and header != body_token:
                call.violate("Runner-Token header differs from the body token",
                             _double_reject("Runner-Token header differs from the body token"))
        elif auth == AUTH_BODY_ONLY:
            if header is not None and header != body_token:
                call.violate("Runner-Token header differs from the body token",
                             _double_reject("Runner-Token header differs from the body token"))
        elif auth == AUTH_RUNNER_HEADER:
            if header is None:
                call.violate("Runner-Token header missing",
                             _double_reject("Runner-Token header missing"))
        elif auth == AUTH_PAT:
            if header is not None:
                call.violate("Runner-Token header on the PAT reset (Private-Token only)",
                             _double_reject("Runner-Token header on the PAT reset"))

    # -- shared endpoint logic -------------------------------------------------

    def _authenticate(self, call, token=None, manager=True):
        """Rails' authenticate_runner!: the runner for the token, or None (-> 403).

        Like Rails it heartbeats the runner and records the runner manager
        (system_id, "<legacy>" when absent).
        """
        token = call.params.get("token") if token is None else token
        r = self.runner(token) if isinstance(token, str) else None
        if r is None or r.expired():
            return None
        r.contacted_at = time.monotonic()
        if isinstance(call.params.get("info"), dict):
            r.info = call.params["info"]
        if manager:
            r.system_ids.add(call.params.get("system_id") or "<legacy>")
        return r

    def _reset_token(self, r):
        r.old_tokens.append(r.token)
        r.token = self.new_runner_token(created=r.token.startswith("glrt-"))
        r.token_expires_at = self._issue_expiry()
        return json_response(201, {"token": r.token, "token_expires_at": r.token_expires_at})

    # -- endpoints (protocol.md 2, 3.1, 4) -----------------------------------

    @endpoint("POST", "/runners", auth=AUTH_RUNNER, accept_json=True, params={
        "token": STR, "description": STR, "maintenance_note": STR, "maintainer_note": STR,
        "info": HASH, "active": BOOL, "paused": BOOL, "locked": BOOL, "run_untagged": BOOL,
        "tag_list": TAGS, "access_level": one_of("not_protected", "ref_protected"),
        "maximum_timeout": INT})
    def register(self, call):
        """Legacy registration: a registration token creates a runner (2.2)."""
        p = call.params
        if p["token"] not in self.registration_tokens:
            return message(403, FORBIDDEN)
        if self.legacy_registration_disabled:
            return message(410, "410 Gone - runner registration disallowed")
        tags = p.get("tag_list") or []
        if isinstance(tags, str):
            tags = [t.strip() for t in tags.split(",") if t.strip()]
        r = self.add_runner(token=self.new_runner_token(created=False),
                            expires_at=self._issue_expiry(), paused=bool(p.get("paused")),
                            description=p.get("description") or "", tag_list=tags,
                            registration=dict(p))
        return json_response(201, {"id": r.id, "token": r.token,
                                   "token_expires_at": r.token_expires_at})

    @endpoint("POST", "/runners/verify", auth=AUTH_RUNNER, accept_json=True,
              params={"token": STR, "system_id": STR, "info": HASH})
    def verify(self, call):
        r = self._authenticate(call)
        if r is None:
            return message(403, FORBIDDEN)
        return json_response(200, {"id": r.id, "token": r.token,
                                   "token_expires_at": r.token_expires_at})

    @endpoint("DELETE", "/runners", auth=AUTH_RUNNER, params={"token": STR})
    def unregister(self, call):
        r = self._authenticate(call, manager=False)
        if r is None:
            return message(403, FORBIDDEN)
        del self.runners[r.id]
        return no_content()

    @endpoint("DELETE", "/runners/managers", auth=AUTH_RUNNER,
              params={"token": STR, "system_id": STR}, required=("token", "system_id"))
    def unregister_manager(self, call):
        r = self._authenticate(call, manager=False)
        if r is None:
            return message(403, FORBIDDEN)
        if call.params["system_id"] not in r.system_ids:
            return message(404, "404 Runner manager not found")
        r.system_ids.discard(call.params["system_id"])
        return no_content()

    @endpoint("POST", "/runners/reset_authentication_token", auth=AUTH_BODY_ONLY,
              accept_json=True, params={"token": STR})
    def reset_token(self, call):
        r = self._authenticate(call, manager=False)
        if r is None:
            return message(403, FORBIDDEN)
        return self._reset_token(r)

    @endpoint("POST", r"/runners/(?P<id>\d+)/reset_authentication_token", auth=AUTH_PAT,
              body=None, accept_json=True, required=())
    def reset_token_with_pat(self, call):
        pat = call.request.headers.get("Private-Token")
        if not pat or pat not in self.pats:
            return message(401, UNAUTHORIZED)
        r = self.runners.get(int(call.args["id"]))
        if r is None:
            return message(404, "404 Runner Not Found")
        if not self.pats[pat]:
            return message(403, FORBIDDEN)
        return self._reset_token(r)

    @endpoint("GET", "/runners/router/discovery", auth=AUTH_RUNNER_HEADER, body=None,
              accept_json=True, required=())
    def router_discovery(self, call):
        if self._authenticate(call, token=call.request.headers.get("Runner-Token"),
                              manager=False) is None:
            return message(403, FORBIDDEN)
        if self.router_url is None:
            return message(501, "Job Router is not available. Please contact your administrator.")
        return json_response(200, {"server_url": self.router_url})

    @endpoint("POST", "/jobs/request", auth=AUTH_RUNNER, accept_json=True, params={
        "token": STR, "system_id": STR, "last_update": STR, "info": HASH, "session": HASH})
    def request_job(self, call):
        """acquire_ci_job! (4.3): 204 + queue value when there is nothing to run."""
        r = self._authenticate(call)
        if r is None:
            return message(403, FORBIDDEN)
        last_update = ("X-GitLab-Last-Update", r.queue_value)
        if r.paused or call.params.get("last_update") == r.queue_value:
            return no_content([last_update])
        job = self._pick_job(r, call)
        if job is None:
            return no_content([last_update])
        return job


def _media_type(value):
    return value.split(";", 1)[0].strip().lower()


def _media_types(value):
    return [_media_type(v) for v in value.split(",")]


# ---------------------------------------------------------------------------
# HTTP plumbing
# ---------------------------------------------------------------------------

class _ClientGone(Exception):
    """The client closed the connection before the whole request arrived."""


class _BadFraming(Exception):
    """The request body framing cannot be parsed (bad Content-Length, chunks)."""


class _Connection:
    """One accepted connection: its current socket (TLS-wrapped or not) and thread."""

    def __init__(self, sock):
        self.id = 0
        self.sock = sock
        self.thread = None
        self.client_cert = None

    def close(self):
        # socket.socket.shutdown on the fd, bypassing SSLSocket's own
        # shutdown (which would tear its state down under the reader).
        try:
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
        except OSError:
            pass


class _Handler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 framing and writing; the decisions belong to GitLabDouble."""

    protocol_version = "HTTP/1.1"
    server_version = "gitlab-double"
    sys_version = ""
    disable_nagle_algorithm = True

    def setup(self):
        self.double = self.server.double
        self.conn = self.double._local.conn
        self.timeout = self.double.idle_timeout
        super().setup()

    def log_message(self, fmt, *args):
        pass  # the records are the log

    def version_string(self):
        return self.server_version

    def _serve(self):
        d = self.double
        split = urlsplit(self.path)
        req = Request(method=self.command, path=split.path, query=split.query,
                      headers=Headers(self.headers.items()), body=b"", time=time.monotonic(),
                      connection=self.conn.id, client_cert=self.conn.client_cert)
        try:
            early = d._take_rule(req, early=True)
            if early is not None:
                self._drop_mid_body(req)
                return
            req.body, req.chunked = self._read_body()
        except _BadFraming as e:
            req.violations.append(f"{req.method} {req.path}: bad request framing: {e}")
            with d._lock:
                d._requests.append(req)
                d._violations.extend(req.violations)
            self.close_connection = True
            self._write(req, message(400, f"400 Bad Request ({e})"))
            return
        except (_ClientGone, OSError) as e:
            req.complete = False
            req.body = getattr(e, "partial", b"")
            with d._lock:
                d._requests.append(req)
            d._finish(req, None)
            self.close_connection = True
            return
        call, rule = d._receive(req)
        if rule is not None and rule.delay and d._stopping.wait(rule.delay):
            self.close_connection = True
            d._finish(req, None)
            return
        action = rule.action if rule is not None else None
        if action == "drop":
            self.close_connection = True
            d._finish(req, None)
            return
        if action == "echo_html":
            self._write(req, _echo_page(req, rule.status or 502))
            return
        front = None
        if rule is None or rule.status is None:
            front = d._workhorse_front(req)     # may hold the request (long polling)
            if front is STOPPED:
                self.close_connection = True
                d._finish(req, None)
                return
        resp = front if front is not None else d._answer(call, rule)
        if action == "drop_after_handling":
            self.close_connection = True
            d._finish(req, None)
            return
        if action == "drop_after_headers":
            if len(resp.body) < 2 or resp.status in (204, 304):
                resp.status = 200 if resp.status in (204, 304) else resp.status
                resp.body = b'{"message":"double: this body is cut short"}'
            self.close_connection = True
            self._write(req, resp, cut=len(resp.body) // 2)
            return
        if action in ("short_content_length", "bad_content_length"):
            cut = rule.cut(resp.body) if callable(rule.cut) else rule.cut
            cut = len(resp.body) // 2 if cut is None else max(0, min(int(cut), len(resp.body)))
            self.close_connection = True
            if action == "short_content_length":
                resp.body = resp.body[:cut]
                self._write(req, resp)
            else:
                self._write(req, resp, length=cut)
            return
        self._write(req, resp)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve

    def _drop_mid_body(self, req):
        """A drop_mid_body rule: read about half of the body, record, close."""
        d = self.double
        req.complete = False
        req.chunked = self.headers.get("Transfer-Encoding") is not None
        try:
            if req.chunked:
                line = self.rfile.readline(1024)
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                req.body = self.rfile.read(max(size // 2, 1) if size else 0)
            else:
                n = int(self.headers.get("Content-Length") or 0)
                req.body = self.rfile.read(n // 2)
        except (ValueError, OSError):
            pass
        with d._lock:
            d._requests.append(req)
        self.close_connection = True
        d._finish(req, None)

    def _read_body(self):
        te = self.headers.get("Transfer-Encoding")
        if te is not None:
            if te.strip().lower() != "chunked":
                raise _BadFraming(f"Transfer-Encoding {te!r} not supported")
            return self._read_chunked(), True
        length = self.headers.get("Content-Length")
        if length is None:
            return b"", False
        try:
            n = int(length)
            if n < 0:
                raise ValueError
        except ValueError:
            raise _BadFraming(f"bad Content-Length {length!r}") from None
        data = self.rfile.read(n)
        if len(data) < n:
            gone = _ClientGone()
            gone.partial = data
            raise gone
        return data, False

    def _read_chunked(self):
        out = bytearray()
        while True:
            line = self.rfile.readline(1024)
            if not line.endswith(b"\n"):
                gone = _ClientGone()
                gone.partial = bytes(out)
                raise gone
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _BadFraming(f"bad chunk size line {line[:40]!r}") from None
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return bytes(out)
            chunk = self.rfile.read(size)
            out += chunk
            if len(chunk) < size or self.rfile.readline(1024) not in (b"\r\n", b"\n"):
                gone = _ClientGone()
                gone.partial = bytes(out)
                raise gone

    def _write(self, req, resp, cut=None, length=None):
        """Send resp; with cut, send only that many body bytes (then the caller closes).

        length: the Content-Length to declare instead of the body's own.
        """
        if not any(k.lower() == "x-request-id" for k, _ in resp.headers):
            resp.headers.append(self.double._request_id_header(req))
        resp.headers.extend(self.double._workhorse_headers(req))
        self.double._finish(req, resp)
        self.send_response(resp.status)
        for k, v in resp.headers:
            self.send_header(k, str(v))
        if resp.status >= 200 and resp.status not in (204, 304):
            self.send_header("Content-Length", str(len(resp.body) if length is None else length))
        self.end_headers()
        if self.command != "HEAD" and resp.status not in (204, 304):
            self.wfile.write(resp.body if cut is None else resp.body[:cut])
        # wfile is unbuffered (wbufsize 0): the bytes are with the kernel now.
        req.answered = time.monotonic()


class _Server(http.server.ThreadingHTTPServer):
    """One thread per connection; TLS handshakes happen in that thread, with a timeout."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, handler, double, ssl_context):
        self.double = double
        self.ssl_context = ssl_context
        super().__init__(address, handler)

    def server_bind(self):
        # HTTPServer.server_bind resolves the FQDN of the address, which can
        # stall on a machine without DNS; the name is never used here.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def process_request(self, request, client_address):
        # Counted here, on accept, so open_connections never lags behind.
        conn = _Connection(request)
        self.double._conn_opened(conn)
        conn.thread = threading.Thread(target=self.process_request_thread,
                                       args=(request, client_address, conn),
                                       name=f"gitlab-double-conn-{conn.id}", daemon=True)
        conn.thread.start()

    def process_request_thread(self, request, client_address, conn):
        d = self.double
        d._local.conn = conn
        try:
            if d._stopping.is_set():
                return  # stop() may have listed the connections before this one
            if self.ssl_context is not None:
                request = self._handshake(conn, request)
                if request is None:
                    return
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(conn.sock)
            d._conn_closed(conn)

    def _handshake(self, conn, raw):
        raw.settimeout(HANDSHAKE_TIMEOUT)
        tls = self.ssl_context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        conn.sock = tls
        try:
            tls.do_handshake()
        except (ssl.SSLError, OSError) as e:
            with self.double._lock:
                self.double._tls_failures.append(f"{type(e).__name__}: {e}")
            return None
        with self.double._lock:
            self.double._tls_handshakes += 1
            self.double._tls_resumed += 1 if tls.session_reused else 0
        cert = tls.getpeercert()
        if cert:
            for rdn in cert.get("subject", ()):
                for key, value in rdn:
                    if key == "commonName":
                        conn.client_cert = value
        return tls

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if self.double._stopping.is_set() or isinstance(
                exc, (ConnectionError, TimeoutError, ssl.SSLError)):
            return  # the client went away (or we are stopping): not the double's fault
        self.double._error(traceback.format_exc())
