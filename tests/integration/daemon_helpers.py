"""Helpers for the tests of `runner run` / `runner run-single` against the GitLab double.

    from daemon_helpers import daemons, entry, add_job, ...   # daemons is a fixture

    d = daemons(gitlab, [entry(gitlab, r, "alpha")])           # writes config.toml
    d.start()
    job = add_job(gitlab, r, script=["echo hi"])
    wait_until(lambda: job.status == "success", 20, "the job")
    assert d.stop(signal.SIGQUIT) == 0
    check_run(gitlab, d, [job])                               # violations, checksums, tokens

A Daemon owns one working directory (config.toml, builds/, the journal)
and one process at a time; its stderr goes to a file that survives
restarts (each start appends, with a marker line).  The timing knobs are
set small by default (FAST_ENV) so that nothing waits seconds for a timer.
"""
import json
import os
import re
import secrets
import signal
import string
import subprocess
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNNER = os.path.join(ROOT, "build", "runner")
ASAN_RUNNER = os.path.join(ROOT, "build", "asan", "runner")

# Test knobs of the daemon (milliseconds).  RUNNER_KEEPALIVE_MS stays at
# its default (30 s) unless a test needs the keep-alive PUT.  The gate's
# windows (an endpoint class held while GitLab fails) are short, so that a
# scripted 503 costs a test 100s of ms, not seconds; test_outage runs the
# real ones (GATE_DEFAULTS).
FAST_ENV = {
    "RUNNER_TRACE_INTERVAL_MS": "200",
    "RUNNER_FINAL_BACKOFF_MS": "100",
    "RUNNER_KILL_GRACE_MS": "500",
    "RUNNER_CONFIG_CHECK_MS": "600000",
    "RUNNER_RECOVERY_WAIT_MS": "20000",
    "RUNNER_GATE_MIN_MS": "100",
    "RUNNER_GATE_MAX_MS": "400",
}
# The daemon's own gate windows (an empty knob is the default).
GATE_DEFAULTS = {"RUNNER_GATE_MIN_MS": "", "RUNNER_GATE_MAX_MS": ""}
FINAL_STATES = ("success", "failed")
ASAN_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
_ALNUM = string.ascii_letters + string.digits


def new_token():
    return "glrt-t1_" + "".join(secrets.choice(_ALNUM) for _ in range(20))


def wait_until(predicate, timeout, what, interval=0.02):
    """Poll predicate() until truthy; returns its value, or fails the test naming `what`."""
    from gitlab_double import poll_until

    try:
        return poll_until(predicate, timeout, interval)
    except TimeoutError:
        pytest.fail(f"timed out after {timeout} s waiting for {what}", pytrace=False)


# ---------------------------------------------------------------------------
# config.toml
# ---------------------------------------------------------------------------

def _toml(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)        # a TOML basic string for what tests write
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, dict):             # an inline table ([runners.docker] ulimit = {...})
        return "{ " + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r} as TOML")


def entry(gitlab, runner, name, **keys):
    """One [[runners]] entry (a dict) for a Runner of the double, or a bare token string.

    keys are written as they are; a dict value becomes a sub-table
    ([runners.feature_flags] and the like).
    """
    token = runner if isinstance(runner, str) else runner.token
    e = {"name": name, "url": gitlab.url, "token": token, "executor": "shell",
         "shell": "bash"}
    e.update(keys)
    return e


def config_text(entries, **globals_):
    g = {"concurrent": 1, "check_interval": 1, "shutdown_timeout": 10}
    g.update(globals_)
    lines = [f"{k} = {_toml(v)}" for k, v in g.items()]
    for e in entries:
        lines += ["", "[[runners]]"]
        subs = {k: v for k, v in e.items() if isinstance(v, dict)}
        lines += [f"  {k} = {_toml(v)}" for k, v in e.items() if k not in subs]
        for sub, table in subs.items():
            lines.append(f"  [runners.{sub}]")
            lines += [f"    {k} = {_toml(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# the daemon
# ---------------------------------------------------------------------------

class Daemon:
    """`runner run` (or another command) on a config of its own, in its own directory."""

    def __init__(self, workdir, gitlab, entries=(), asan=False, env=None, **globals_):
        self.dir = str(workdir)
        self.gitlab = gitlab
        self.config = os.path.join(self.dir, "config.toml")
        self.journal = os.path.join(self.dir, "journal")
        self.stderr_path = os.path.join(self.dir, "daemon.stderr")
        self.asan = asan
        self.env = dict(FAST_ENV)
        self.env.update(env or {})
        self.proc = None
        self.starts = 0
        self.secrets = set()            # extra values that must never be logged or PATCHed
        self.entries = list(entries)
        self.globals = dict(globals_)
        for e in self.entries:
            self.secrets.add(e["token"])
        os.makedirs(self.dir, exist_ok=True)
        self.write_config()

    # -- config ---------------------------------------------------------------

    def write_config(self, entries=None, **globals_):
        """(Re)write config.toml; the file's mtime changes (for the reload tests)."""
        if entries is not None:
            self.entries = list(entries)
        self.globals.update(globals_)
        for e in self.entries:
            self.secrets.add(e["token"])
        tmp = self.config + ".tmp"
        with open(tmp, "w") as f:
            f.write(config_text(self.entries, **self.globals))
        os.replace(tmp, self.config)

    # -- process --------------------------------------------------------------

    @property
    def binary(self):
        return ASAN_RUNNER if self.asan else RUNNER

    def start(self, args=None, cwd=None):
        """Start `runner run -c config.toml -d DIR` (or `args` after the binary)."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        if not os.access(self.binary, os.X_OK):
            pytest.fail(f"{self.binary} is missing: run make build/runner build/asan/runner")
        env = dict(os.environ)
        env.pop("CONFIG_FILE", None)
        env.update(self.env)
        if self.asan:
            env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0"
            env["UBSAN_OPTIONS"] = "print_stacktrace=1"
        if args is None:
            args = ["run", "-c", self.config, "-d", self.dir]
        self.starts += 1
        with open(self.stderr_path, "a") as f:
            f.write(f"=== start {self.starts}: runner {args[0]}\n")
        err = open(self.stderr_path, "a")
        try:
            self.proc = subprocess.Popen([self.binary] + list(args), env=env, cwd=cwd or self.dir,
                                         stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        finally:
            err.close()
        self.started_at = time.monotonic()
        return self

    @property
    def pid(self):
        return self.proc.pid

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    def wait(self, timeout=20):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"runner did not exit within {timeout} s; stderr:\n{self.tail()}",
                        pytrace=False)

    def stop(self, sig=signal.SIGQUIT, timeout=20):
        """Send sig and wait for the exit; returns the exit code (asserting ASan is clean)."""
        if self.running():
            self.send_signal(sig)
        rc = self.wait(timeout)
        self.assert_sanitizers_clean()
        return rc

    def kill9(self):
        self.proc.kill()
        self.proc.wait(10)

    def close(self):
        """Teardown: whatever still runs is killed."""
        if self.running():
            self.proc.kill()
            self.proc.wait(10)

    # -- observation ------------------------------------------------------------

    @property
    def stderr(self):
        try:
            with open(self.stderr_path, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def tail(self, n=60):
        return "\n".join(self.stderr.splitlines()[-n:])

    def wait_log(self, pattern, timeout=15):
        """Wait for a stderr line matching the regex; returns the match."""
        rx = re.compile(pattern)
        return wait_until(lambda: rx.search(self.stderr), timeout,
                          f"/{pattern}/ in the runner's log; it has:\n{self.tail()}")

    def rss_kib(self):
        """VmRSS of the process in KiB (None once it is gone)."""
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            return None
        return None

    def journal_files(self):
        try:
            return sorted(os.listdir(self.journal))
        except FileNotFoundError:
            return []

    # -- checks -----------------------------------------------------------------

    def assert_sanitizers_clean(self):
        err = self.stderr
        for marker in ASAN_MARKERS:
            assert marker not in err, f"sanitizer report in the runner's stderr:\n{err[-6000:]}"

    def tokens(self):
        """Every secret that must not be logged nor PATCHed: runner and job tokens."""
        g = self.gitlab
        with g._lock:
            out = {r.token for r in g.runners.values()}
            out |= {t for r in g.runners.values() for t in r.old_tokens}
            out |= {j.token for j in g.jobs.values()}
        return {t for t in out | self.secrets if t}

    def assert_no_tokens(self, extra=()):
        tokens = self.tokens() | set(extra)
        err = self.stderr
        for t in tokens:
            assert t not in err, f"a token ({t[:10]}...) appears in the runner's stderr"
        for req in self.gitlab.requests_for("PATCH", r"/trace$"):
            body = req.body.decode("utf-8", "replace")
            for t in tokens:
                assert t not in body, f"a token ({t[:10]}...) appears in PATCH {req.path}"


@pytest.fixture
def daemons(tmp_path):
    """make(gitlab, entries, asan=False, env=None, **globals) -> Daemon (not started).

    Each gets its own directory under tmp_path; all are killed at teardown.
    """
    made = []

    def make(gitlab, entries=(), **kwargs):
        d = Daemon(tmp_path / f"d{len(made)}", gitlab, entries, **kwargs)
        made.append(d)
        return d

    yield make
    for d in made:
        d.close()


# ---------------------------------------------------------------------------
# jobs and requests on the double
# ---------------------------------------------------------------------------

def without_sources(variables=None):
    """variables plus GIT_STRATEGY=none unless they choose a strategy.

    The daemon tests are about polling, logs and reports; the double serves
    no repository, so fetching sources would fail every job.  The source
    tests (test_job_sources.py) serve real ones with git http-backend.
    """
    from gitlab_double.payloads import normalize_variables

    out = normalize_variables(variables)
    if not any(v.get("key") == "GIT_STRATEGY" for v in out):
        out.append({"key": "GIT_STRATEGY", "value": "none", "public": True, "masked": False})
    return out


def add_job(gitlab, runner, id=None, update_interval=0, **payload):
    """Queue a job for runner built by job_payload(**payload); returns the Job.

    update_interval 0 (the double sends "0", which the runner ignores)
    keeps the daemon at RUNNER_TRACE_INTERVAL_MS; pass a number of seconds to
    have GitLab set it.  Sources are not fetched (without_sources) unless the
    variables choose a GIT_STRATEGY.  Job options (accept_after, ...) pass through.
    """
    from gitlab_double import job_payload
    from gitlab_double.jobs import JOB_OPTIONS

    options = {k: payload.pop(k) for k in list(payload) if k in JOB_OPTIONS}
    payload["variables"] = without_sources(payload.get("variables"))
    return gitlab.add_job(job_payload(**payload), runner=runner, id=id,
                          update_interval=update_interval, **options)


def run_one(gitlab, daemons, tmp_path, entry_keys=None, wait_s=60, **payload):
    """One job (add_job(**payload)) on a fresh runner whose builds are under tmp_path.

    entry_keys add to its [[runners]] entry; the daemon is stopped and
    check_run() passed before the finished Job is returned.
    """
    r = gitlab.add_runner(token=new_token())
    keys = {"builds_dir": str(tmp_path / "builds")}
    keys.update(entry_keys or {})
    d = daemons(gitlab, [entry(gitlab, r, "one", **keys)])
    job = add_job(gitlab, r, **payload)
    d.start()
    gitlab.wait_for_job(job, FINAL_STATES, timeout=wait_s)
    assert d.stop() == 0
    check_run(gitlab, d, [job])
    return job


def job_requests(gitlab, job):
    """Every request about a job (PUT /jobs/:id, PATCH /jobs/:id/trace), in order."""
    return gitlab.requests_for("*", rf"^/api/v4/jobs/{job.id}(/trace)?$")


def is_final_put(req):
    if req.method != "PUT":
        return False
    try:
        return req.json().get("state") in FINAL_STATES
    except ValueError:
        return False


def final_puts(gitlab, job):
    return [r for r in job_requests(gitlab, job) if is_final_put(r)]


def patches(gitlab, job):
    return gitlab.requests_for("PATCH", rf"^/api/v4/jobs/{job.id}/trace$")


def content_range(req):
    start, end = req.headers["Content-Range"].split("-")
    return int(start), int(end)


def job_requests_of(gitlab, token):
    """POST /jobs/request made with this runner token."""
    out = []
    for r in gitlab.requests_for("POST", r"^/api/v4/jobs/request$"):
        try:
            if r.json().get("token") == token:
                out.append(r)
        except ValueError:
            pass
    return out


def assert_last_update_echoed(reqs):
    """Each job request carries the last X-GitLab-Last-Update its runner got (4.4).

    A 201 or a Workhorse 204 without the header leaves the value as it was.
    Returns how many requests echoed a value.
    """
    current, echoed = None, 0
    for q in reqs:
        sent = q.json().get("last_update")
        assert sent == current, f"last_update {sent!r}, expected {current!r}"
        echoed += sent is not None
        value = q.response_headers.get("X-GitLab-Last-Update") if q.response_headers else None
        if value:
            current = value
    return echoed


def pid_gone(pid):
    """True when no such process runs (gone, or a zombie waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def check_run(gitlab, daemon, jobs=(), daemons=()):
    """What every daemon test ends with: no violations, good checksums, no token leaks."""
    assert gitlab.errors == [], "\n".join(gitlab.errors)
    assert gitlab.violations == [], "protocol violations:\n  " + "\n  ".join(
        gitlab.violations) + "\n" + gitlab.summary()
    for job in jobs:
        if job.final is not None:
            assert job.checksum_ok is True, job.checksum_mismatch
    for d in (daemon,) + tuple(daemons):
        if d is not None:
            d.assert_no_tokens()
            d.assert_sanitizers_clean()
