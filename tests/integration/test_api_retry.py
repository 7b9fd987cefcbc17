"""The retry layer and token placement, through the real client code
(build/tools/api_call drives one api/ call) against the strict double.

These are the incidents the project was started for: a retried PUT that
went out with an empty body, a job token sent as PRIVATE-TOKEN, a 429 that
hung a caller, failed answers nobody could see in the log, and a storm of
429s that piled up connections.
"""
import json
import os
import re
import subprocess
import time
from email.utils import formatdate

import pytest

from conftest import ROOT

API_CALL = os.path.join(ROOT, "build", "tools", "api_call")
RUNNER_TOKEN = "glrt-t1_RunnerTokenAbcdefghij"


@pytest.fixture
def runner_and_job(gitlab):
    r = gitlab.add_runner(token=RUNNER_TOKEN, id=17)
    job = gitlab.add_job(status="running", runner=r)
    return r, job


def api_call(*args, timeout=60):
    """Run api_call; returns (last JSON line, stderr, seconds taken)."""
    if not os.access(API_CALL, os.X_OK):
        pytest.fail(f"{API_CALL} is missing: run make")
    start = time.monotonic()
    p = subprocess.run([API_CALL] + [str(a) for a in args], capture_output=True,
                       text=True, timeout=timeout)
    took = time.monotonic() - start
    assert p.returncode == 0, p.stderr
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    return lines[-1], p.stderr, took


def assert_no_secret(text, *secrets):
    for s in secrets:
        assert s not in text, f"a token appears in the output: {text!r}"


def bodies(reqs):
    return [r.body for r in reqs]


# -- the same bytes on every attempt (issue 38651) ---------------------------

@pytest.mark.parametrize("faults", [
    [{"status": 429, "headers": {"Retry-After": "1"}}],
    [{"status": 502}],
    [{"action": "drop"}],
    [{"action": "drop_after_headers", "status": 503}],
    [{"status": 429}, {"action": "drop"}, {"status": 502}],
])
def test_retried_put_sends_identical_nonempty_bodies(gitlab, runner_and_job, faults):
    _, job = runner_and_job
    for f in faults:
        gitlab.script(method="PUT", path=rf"^/api/v4/jobs/{job.id}$", **f)
    res, err, _ = api_call(gitlab.url, job.token, "update", job.id, "failed", "script_failure")
    # Job-Status: failed on the answer reads as "abort" (gitlab-runner checks it
    # before the 200); for a final report both mean the job is over.
    assert res["result"] == "abort" and res["status"] == 200, err
    assert res["job_status"] == "failed"
    puts = gitlab.requests_for("PUT", rf"/jobs/{job.id}$")
    assert len(puts) >= len(faults) + 1
    first = puts[0].body
    assert len(first) > 100
    assert all(b == first for b in bodies(puts))
    sent = json.loads(first)
    assert sent["token"] == job.token and sent["state"] == "failed"
    assert sent["failure_reason"] == "script_failure"
    assert sent["output"] == {"checksum": "crc32:0d7cf601", "bytesize": 51}
    # Every attempt of one logical request carries the same fresh X-Request-Id.
    ids = {r.headers["X-Request-Id"] for r in puts}
    assert len(ids) == 1 and re.fullmatch(r"[0-9a-f]{32}", ids.pop())
    assert job.final is not None and job.status == "failed"


@pytest.mark.parametrize("faults", [
    [{"status": 429, "headers": {"Retry-After": "1"}}],
    [{"status": 502}, {"action": "drop"}],
    [{"action": "drop_after_headers", "status": 500}],
])
def test_retried_patch_sends_identical_nonempty_bodies(gitlab, runner_and_job, faults):
    _, job = runner_and_job
    for f in faults:
        gitlab.script(method="PATCH", path=r"/trace$", **f)
    text = "line one\nline two \u00fc\n"
    res, err, _ = api_call(gitlab.url, job.token, "patch", job.id, 0, text)
    assert res["result"] == "ok", err
    assert res["offset"] == len(text.encode())
    patches = gitlab.requests_for("PATCH", r"/trace$")
    assert len(patches) >= len(faults) + 1
    assert all(p.body == text.encode() for p in patches)
    assert all(p.headers["Content-Range"] == f"0-{len(text.encode()) - 1}" for p in patches)
    assert job.log == text.encode()


# -- when to wait, and how long ---------------------------------------------

def gaps(reqs):
    return [b.time - a.time for a, b in zip(reqs, reqs[1:])]


def test_retry_after_seconds_is_honoured(gitlab, runner_and_job):
    _, job = runner_and_job
    gitlab.script(method="PUT", path=r"/jobs/\d+$", status=429, headers={"Retry-After": "2"})
    res, err, _ = api_call(gitlab.url, job.token, "update", job.id, "success")
    assert res["result"] == "ok"
    puts = gitlab.requests_for("PUT", r"/jobs/\d+$")
    assert len(puts) == 2
    assert gaps(puts)[0] >= 2.0
    assert "waiting 2000 ms (Retry-After) before attempt 2/5" in err


def test_retry_after_http_date_is_honoured(gitlab, runner_and_job):
    _, job = runner_and_job
    # An HTTP-date 3 s ahead: the wait ends no earlier than that second starts.
    when = formatdate(time.time() + 3, usegmt=True)
    gitlab.script(method="PUT", path=r"/jobs/\d+$", status=503, headers={"Retry-After": when})
    res, err, _ = api_call(gitlab.url, job.token, "update", job.id, "success")
    assert res["result"] == "ok"
    puts = gitlab.requests_for("PUT", r"/jobs/\d+$")
    assert len(puts) == 2
    assert gaps(puts)[0] >= 1.9
    assert re.search(r"waiting \d+ ms \(Retry-After\)", err)


def test_ratelimit_resettime_is_honoured(gitlab, runner_and_job):
    _, job = runner_and_job
    when = formatdate(time.time() + 2, usegmt=True)
    gitlab.script(method="PUT", path=r"/jobs/\d+$", status=429,
                  headers={"RateLimit-ResetTime": when, "Retry-After": "30"})
    res, err, took = api_call(gitlab.url, job.token, "update", job.id, "success")
    assert res["result"] == "ok"
    assert "(RateLimit-ResetTime)" in err
    assert took < 10


def test_retry_after_past_the_deadline_is_not_waited_for(gitlab, runner_and_job):
    _, job = runner_and_job
    gitlab.script(method="PUT", path=r"/jobs/\d+$", status=429,
                  headers={"Retry-After": "3600"}, times=None)
    res, err, took = api_call(gitlab.url, job.token, "update", job.id, "success")
    # The caller gets the 429 at once instead of a call that hangs for an hour.
    assert took < 5
    assert res["status"] == 429 and res["result"] == "failed"
    assert len(gitlab.requests_for("PUT", r"/jobs/\d+$")) == 1
    assert "the wait would pass the deadline" not in err or "giving up" in err


def test_429_without_retry_after_backs_off_with_jitter(gitlab, runner_and_job):
    _, job = runner_and_job
    waits = []
    for _ in range(2):
        gitlab.script(method="PUT", path=r"/jobs/\d+$", status=429, times=4)
        res, err, _ = api_call(gitlab.url, job.token, "update", job.id, "running")
        assert res["result"] == "ok"
        w = [int(m) for m in re.findall(r"waiting (\d+) ms \(backoff\)", err)]
        assert len(w) == 4
        # Exponential from 100 ms with "equal jitter": [base/2, base], the first too.
        for k, ms in enumerate(w):
            base = 100 * 2 ** k
            assert base // 2 <= ms <= base, (k, ms)
        waits.append(w)
    assert waits[0] != waits[1], "two runs waited exactly the same: no jitter"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
def test_client_errors_are_not_retried(gitlab, runner_and_job, status):
    _, job = runner_and_job
    gitlab.script(method="PUT", path=r"/jobs/\d+$", status=status, times=None)
    res, err, _ = api_call(gitlab.url, job.token, "update", job.id, "success")
    assert res["status"] == status
    assert len(gitlab.requests_for("PUT", r"/jobs/\d+$")) == 1
    assert "waiting" not in err


def test_patch_404_and_403_are_not_retried(gitlab, runner_and_job):
    _, job = runner_and_job
    gitlab.script(method="PATCH", path=r"/trace$", status=404)
    res, _, _ = api_call(gitlab.url, job.token, "patch", job.id, 0, "x")
    assert res["result"] == "not_found"
    gitlab.script(method="PATCH", path=r"/trace$", status=403)
    res, _, _ = api_call(gitlab.url, job.token, "patch", job.id, 0, "x")
    assert res["result"] == "abort"
    assert len(gitlab.requests_for("PATCH", r"/trace$")) == 2


# -- what the log says ------------------------------------------------------

def test_failed_answers_are_logged_with_request_id_and_rate_limits(gitlab, runner_and_job):
    _, job = runner_and_job
    gitlab.script(method="PUT", path=r"/jobs/\d+$", status=429, body=b'{"message":"slow down"}',
                  headers={"Retry-After": "1", "RateLimit-Limit": "60",
                           "RateLimit-Remaining": "0", "RateLimit-Observed": "61",
                           "RateLimit-Reset": "1796032860"})
    gitlab.script(method="PUT", path=r"/jobs/\d+$", status=500, body=b"boom")
    res, err, _ = api_call(gitlab.url, job.token, "update", job.id, "success")
    assert res["result"] == "ok"
    rid = gitlab.requests_for("PUT", r"/jobs/\d+$")[0].headers["X-Request-Id"]
    lines = err.splitlines()
    first = [l for l in lines if "HTTP 429" in l]
    assert len(first) == 1
    assert f"PUT /api/v4/jobs/{job.id}: HTTP 429, request id {rid}" in first[0]
    for h in ("Retry-After: 1", "RateLimit-Limit: 60", "RateLimit-Remaining: 0",
              "RateLimit-Observed: 61", "RateLimit-Reset: 1796032860"):
        assert h in first[0]
    assert 'body: {"message":"slow down"}' in first[0]
    assert any("HTTP 500" in l and "body: boom" in l for l in lines)
    assert_no_secret(err, job.token, RUNNER_TOKEN)


def test_transport_failures_are_logged_and_retried(gitlab, runner_and_job):
    _, job = runner_and_job
    gitlab.script(method="PATCH", path=r"/trace$", action="drop_after_headers", status=200,
                  times=2)
    res, err, _ = api_call(gitlab.url, job.token, "patch", job.id, 0, "abc")
    assert res["result"] == "ok"
    assert re.search(r"PATCH /api/v4/jobs/\d+/trace\?debug_trace=false: .*curl \d+", err)
    assert_no_secret(err, job.token)


def test_unreachable_server_gives_up_quickly_with_a_clear_error(tmp_path):
    # A port nothing listens on: connection refused, retried, then answered.
    res, err, took = api_call("http://127.0.0.1:1", "glrt-t1_unreachabletoken0", "verify")
    assert res["result"] == "failed" and res["status"] == 0
    assert "Couldn't connect to server" in err or "Connection refused" in err
    assert "giving up after 5 attempts" in err
    assert took < 20


# -- tokens only in their field (protocol.md 1.3) ---------------------------

def test_every_token_in_its_field(gitlab, runner_and_job):
    r, job = runner_and_job
    api_call(gitlab.url, job.token, "update", job.id, "running")
    api_call(gitlab.url, job.token, "patch", job.id, 0, "log")
    api_call(gitlab.url, r.token, "request")
    api_call(gitlab.url, r.token, "verify")
    reqs = gitlab.requests
    assert len(reqs) == 4
    for q in reqs:
        assert "Private-Token" not in q.headers, q.target
        assert job.token not in q.target and r.token not in q.target
    # runner <version> (<revision>; <os>/<arch>), with the names Go uses.
    with open(os.path.join(ROOT, "VERSION")) as f:
        version = f.read().strip()
    ua = re.compile(re.escape(f"runner {version} (") + r"([0-9a-f]{8}|unknown); linux/[a-z0-9]+\)")
    for q in reqs:
        assert ua.fullmatch(q.headers["User-Agent"]), q.headers["User-Agent"]
    put, patch, request, verify = reqs
    assert put.headers["Job-Token"] == job.token == put.json()["token"]
    assert "Runner-Token" not in put.headers
    assert patch.headers["Job-Token"] == job.token and patch.body == b"log"
    assert "Runner-Token" not in patch.headers
    for q in (request, verify):
        assert q.headers["Runner-Token"] == r.token == q.json()["token"]
        assert "Job-Token" not in q.headers
    assert gitlab.violations == []


# -- a storm of 429s --------------------------------------------------------

def test_429_storm_keeps_descriptors_bounded_and_recovers(gitlab):
    runners = 10
    for i in range(runners):
        gitlab.add_runner(token=f"glrt-t1_stormrunner{i}", id=100 + i)
    gitlab.storm(seconds=30, status=429, headers={"Retry-After": "1"})
    storm_end = time.monotonic() + 30
    p = subprocess.run([API_CALL, gitlab.url, "glrt-t1_stormrunner", "poll", str(runners), "36"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = [json.loads(l) for l in p.stdout.splitlines()]
    summary = out[-1]
    pollers = [o for o in out if "poller" in o]
    samples = [o for o in out if o.get("sample")]
    assert len(pollers) == runners
    # File descriptors: the loop's own few, plus at most one connection per
    # runner in flight and libcurl's idle cache; never one per waiting retry.
    assert summary["max_fds"] - summary["base_fds"] <= 2 * runners + 4, samples
    assert gitlab.max_open_connections <= 2 * runners + 2
    # It recovered by itself: after the storm every runner got its 204s.
    for po in pollers:
        assert po["none"] >= 1, po
    after = [q for q in gitlab.requests if q.time > storm_end + 0.5]
    assert after and all(q.response_status == 204 for q in after)
    # During the storm the client waited as told, and as one: after the
    # first answers (the runners asked together), one probe per
    # Retry-After window for the endpoint, not one request per runner
    # (which would be about 300).
    during = [q for q in gitlab.requests if q.time <= storm_end]
    assert len(during) <= runners + 2 * 30, len(during)
    for second in range(2, 30):
        start = storm_end - 30 + second
        in_window = [q for q in during if start <= q.time < start + 1]
        assert len(in_window) <= 2, [(q.time - start, q.target) for q in in_window]


# -- router discovery (protocol.md 3.1) ---------------------------------------

def discovery_lines(gitlab, token, n):
    p = subprocess.run([API_CALL, gitlab.url, token, "discovery", str(n)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return [json.loads(l) for l in p.stdout.splitlines()], p.stderr


def test_discovery_without_router_is_cached_and_logged_once(gitlab):
    r = gitlab.add_runner(token="glrt-t1_DiscoveryToken00000", id=21)
    lines, err = discovery_lines(gitlab, r.token, 3)
    assert [l["result"] for l in lines] == ["disabled"] * 3
    reqs = gitlab.requests_for("GET", r"/runners/router/discovery$")
    # One request: "no router" is an answer too, kept for an hour.
    assert len(reqs) == 1
    assert reqs[0].headers["Runner-Token"] == r.token and reqs[0].body == b""
    assert reqs[0].headers["Accept"] == "application/json"
    assert err.count("job router: not available, polling GitLab directly") == 1
    assert_no_secret(err, r.token)


def test_discovery_with_router_gives_its_url(gitlab):
    gitlab.router_url = "wss://kas.example.com/-/kubernetes-agent/"
    r = gitlab.add_runner(token="glrt-t1_DiscoveryToken00001", id=22)
    lines, err = discovery_lines(gitlab, r.token, 2)
    assert [l["result"] for l in lines] == ["ok", "ok"]
    assert all(l["server_url"] == gitlab.router_url for l in lines)
    assert len(gitlab.requests_for("GET", r"/runners/router/discovery$")) == 1
    assert err.count("job router: wss://kas.example.com/-/kubernetes-agent/") == 1


def test_discovery_with_unknown_token_is_forbidden(gitlab):
    lines, err = discovery_lines(gitlab, "glrt-t1_NobodyKnowsThisOne0", 1)
    assert lines[0]["result"] == "forbidden" and lines[0]["status"] == 403


# -- the same calls under the sanitizers and valgrind --------------------------

ASAN_API_CALL = os.path.join(ROOT, "build", "asan", "tools", "api_call")


def test_retries_under_asan(gitlab, runner_and_job):
    _, job = runner_and_job
    gitlab.script(method="PUT", path=r"/jobs/\d+$", status=429, headers={"Retry-After": "1"})
    gitlab.script(method="PUT", path=r"/jobs/\d+$", action="drop")
    gitlab.script(method="PATCH", path=r"/trace$", status=502)
    for args in (["update", job.id, "running"], ["patch", job.id, 0, "x" * 70000],
                 ["request"], ["verify"], ["discovery", 2]):
        token = job.token if args[0] in ("update", "patch") else RUNNER_TOKEN
        p = subprocess.run([ASAN_API_CALL, gitlab.url, token] + [str(a) for a in args],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert "ERROR: AddressSanitizer" not in p.stderr
        assert "runtime error" not in p.stderr


def test_commands_clean_under_valgrind(gitlab, tmp_path):
    import shutil
    if shutil.which("valgrind") is None:
        pytest.fail("valgrind is missing: packaging/install-deps.sh installs it")
    r = gitlab.add_runner(token="glrt-t1_ValgrindToken0000000", id=31)
    gitlab.script(method="POST", path=r"/runners/verify$", status=503, times=1)
    cfg = tmp_path / "config.toml"
    vg = ["valgrind", "--quiet", "--leak-check=full", "--show-leak-kinds=definite,indirect",
          "--errors-for-leak-kinds=definite,indirect", "--error-exitcode=99",
          os.path.join(ROOT, "build", "runner")]
    for args in (["register", "-n", "-c", str(cfg), "--url", gitlab.url, "--token", r.token,
                  "--executor", "shell", "--name", "vg"],
                 ["verify", "-c", str(cfg)],
                 ["reset-token", "-c", str(cfg), "--name", "vg"],
                 ["unregister", "-c", str(cfg), "--name", "vg"]):
        p = subprocess.run(vg + args, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, (args, p.stderr)
