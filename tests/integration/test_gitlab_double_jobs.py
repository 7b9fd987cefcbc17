"""Self-tests of the GitLab double's job side, with raw http.client: Workhorse
long polling, job state helpers, the final-update loop (202/412, checksum),
trace PATCH realism, job payloads and the standalone pipeline mode.

The daemon's job tests lean on these behaviours; pinning them here means a
failing daemon test points at the daemon, not at the double.
"""
import http.client
import json
import os
import signal
import subprocess
import sys
import time
import types
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor

import pytest

from double_fixtures import gitlab, gitlab_factory  # noqa: F401
from gitlab_double import FAILURE_REASONS, GitLabDouble, job_payload

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "glrt-t1_AbCdEfGhIjKlMnOpQrSt"
SYSTEM_ID = "s_0123456789ab"


# --- a fake runner made of http.client calls -----------------------------------

class Resp:
    def __init__(self, r):
        self.status = r.status
        self.headers = r.headers
        self.body = r.read()

    def json(self):
        return json.loads(self.body)


def call(target, method, path, body=None, headers=None, timeout=5):
    """One well-formed request on a fresh connection; a dict body is JSON."""
    h = {"X-Request-Id": uuid.uuid4().hex, "User-Agent": "runner 0.1 (test)"}
    if isinstance(body, dict):
        h["Content-Type"] = "application/json"
        body = json.dumps(body)
    h.update(headers or {})
    c = http.client.HTTPConnection(target.host, target.port, timeout=timeout)
    try:
        c.request(method, "/api/v4/" + path, body=body, headers=h)
        return Resp(c.getresponse())
    finally:
        c.close()


def request_job(target, token=TOKEN, last_update=None, timeout=5):
    body = {"token": token, "system_id": SYSTEM_ID}
    if last_update is not None:
        body["last_update"] = last_update
    return call(target, "POST", "jobs/request", body, timeout=timeout,
                headers={"Runner-Token": token, "Accept": "application/json"})


def put(target, job, state, log=None, **fields):
    """PUT /jobs/:id; with log (bytes), output describes it as the runner would."""
    body = {"token": job.token, "state": state, **fields}
    if log is not None:
        body["output"] = {"checksum": "crc32:%08x" % zlib.crc32(log)}
        if log:
            body["output"]["bytesize"] = len(log)
    return call(target, "PUT", f"jobs/{job.id}", body, headers={"Job-Token": job.token})


def patch(target, job, data, start=0):
    return call(target, "PATCH", f"jobs/{job.id}/trace", data, headers={
        "Job-Token": job.token, "Content-Type": "text/plain",
        "Content-Range": f"{start}-{start + len(data) - 1}"})


def holding(d):
    """Wait until Workhorse holds the first request."""
    d.wait_for(lambda: d.requests and d.requests[0].hold_outcome == "holding", timeout=2)


def in_thread(fn, *args, **kwargs):
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(fn, *args, **kwargs)
    pool.shutdown(wait=False)
    return future


@pytest.fixture
def double():
    """A double whose violations the test inspects itself."""
    d = GitLabDouble().start()
    yield d
    d.stop()
    assert d.errors == []


def picked_job(d, **options):
    """A job the client got through POST /jobs/request (running, handed out)."""
    if d.runner(TOKEN) is None:
        d.add_runner(token=TOKEN, id=17)
    job = d.add_job(**options)
    r = request_job(d)
    assert r.status == 201 and r.json()["id"] == job.id
    return job


# --- long polling (protocol.md 4.4) ------------------------------------------

def test_long_polling_off_answers_at_once_without_polling_header(gitlab):
    runner = gitlab.add_runner(token=TOKEN)
    r = request_job(gitlab, last_update=runner.queue_value)
    assert r.status == 204 and r.headers["X-GitLab-Last-Update"] == runner.queue_value
    assert "Gitlab-Ci-Builds-Polling" not in r.headers
    assert gitlab.requests[0].held is None


def test_long_poll_passes_requests_it_must_not_hold(gitlab_factory):
    d = gitlab_factory(long_poll=5)
    runner = d.add_runner(token=TOKEN)
    start = time.monotonic()
    first = request_job(d)                              # no last_update
    stale = request_job(d, last_update="0" * 32)        # differs from the queue value
    unknown = request_job(d, token="glrt-unknown-token", last_update=runner.queue_value)
    assert time.monotonic() - start < 1
    assert (first.status, first.headers["X-GitLab-Last-Update"]) == (204, runner.queue_value)
    assert (stale.status, stale.headers["X-GitLab-Last-Update"]) == (204, runner.queue_value)
    assert unknown.status == 403
    for r in (first, stale, unknown):
        assert r.headers["Gitlab-Ci-Builds-Polling"] == "yes"
    assert [q.held for q in d.requests] == [None, None, None]


def test_long_poll_holds_until_timeout(gitlab_factory):
    d = gitlab_factory(long_poll=0.4)
    runner = d.add_runner(token=TOKEN)
    start = time.monotonic()
    r = request_job(d, last_update=runner.queue_value)
    took = time.monotonic() - start
    assert r.status == 204 and 0.35 <= took < 2
    assert "X-GitLab-Last-Update" not in r.headers      # Workhorse's own 204
    assert r.headers["Gitlab-Ci-Builds-Polling"] == "yes"
    req = d.requests[0]
    assert req.hold_outcome == "timeout" and 0.35 <= req.held < 2
    assert req.response_status == 204


def test_long_poll_released_by_add_job_without_blocking_others(gitlab_factory):
    d = gitlab_factory(long_poll=10)
    runner = d.add_runner(token=TOKEN)
    other = d.add_runner(token="glrt-t1_OtherRunnerTokenXyz1")
    value = runner.queue_value
    held = in_thread(request_job, d, last_update=value)
    holding(d)
    # Other requests go on while one is held (one thread per connection).
    start = time.monotonic()
    assert call(d, "GET", "nothing").status == 404
    assert time.monotonic() - start < 1
    # A job only the other runner may take does not release this hold.
    d.add_job(runner=other)
    time.sleep(0.1)
    assert not held.done()
    job = d.add_job(runner=runner)
    r = held.result(timeout=2)
    assert r.status == 204 and "X-GitLab-Last-Update" not in r.headers
    assert d.requests[0].hold_outcome == "changed" and d.requests[0].held < 2
    # The runner asks again with its old value, which now differs: the job.
    again = request_job(d, last_update=value)
    assert again.status == 201 and again.json()["id"] == job.id
    assert again.headers["Gitlab-Ci-Builds-Polling"] == "yes"


def test_tick_queue_releases_a_hold(gitlab_factory):
    d = gitlab_factory(long_poll=10)
    runner = d.add_runner(token=TOKEN)
    held = in_thread(request_job, d, last_update=runner.queue_value)
    holding(d)
    d.tick_queue(runner)
    r = held.result(timeout=2)
    assert r.status == 204 and "X-GitLab-Last-Update" not in r.headers
    assert d.requests[0].hold_outcome == "changed"


def test_stop_while_holding_ends_fast():
    d = GitLabDouble(long_poll=30).start()
    runner = d.add_runner(token=TOKEN)
    held = in_thread(request_job, d, last_update=runner.queue_value, timeout=10)
    holding(d)
    start = time.monotonic()
    d.stop()
    assert time.monotonic() - start < 1
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        held.result(timeout=2)
    req = d.requests[0]
    assert req.hold_outcome == "stopped" and req.response_status is None
    assert d.errors == [] and d.open_connections == 0


def test_long_poll_body_over_32_kib_is_413(gitlab_factory):
    d = gitlab_factory(long_poll=5)
    d.add_runner(token=TOKEN)
    body = {"token": TOKEN, "last_update": "x", "info": {"name": "n" * 33000}}
    r = call(d, "POST", "jobs/request", body,
             headers={"Runner-Token": TOKEN, "Accept": "application/json"})
    assert r.status == 413 and r.headers["Gitlab-Ci-Builds-Polling"] == "yes"


# --- job state helpers (5.2, 5.5, 9.6) ---------------------------------------

def test_cancel_then_final_report_ends_canceled(gitlab):
    job = picked_job(gitlab)
    assert patch(gitlab, job, b"one\n").headers["Job-Status"] == "running"
    job.cancel()
    assert job.status == "canceling"
    r = patch(gitlab, job, b"two\n", start=4)
    assert (r.status, r.headers["Job-Status"]) == (202, "canceling")
    r = put(gitlab, job, "running")
    assert (r.status, r.headers["Job-Status"]) == (200, "canceling")
    r = put(gitlab, job, "failed", log=b"one\ntwo\n", failure_reason="job_canceled")
    assert (r.status, r.headers["Job-Status"], r.body) == (200, "canceled", b"200")
    assert job.status == "canceled" and job.checksum_ok
    assert job.failure_reason is None and job.final["failure_reason"] == "job_canceled"
    assert put(gitlab, job, "failed", log=b"one\ntwo\n").status == 403


def test_abort_answers_403_with_job_status_canceled(gitlab):
    job = picked_job(gitlab)
    job.abort()
    for r in (patch(gitlab, job, b"x"), put(gitlab, job, "running")):
        assert (r.status, r.headers["Job-Status"]) == (403, "canceled")
        assert r.json() == {"message": "403 Forbidden - Job is not processing on runner"}
    assert job.log == b""


def test_fail_server_side(gitlab):
    job = picked_job(gitlab)
    job.fail_server_side("stuck_or_timeout_failure")
    r = put(gitlab, job, "success", log=b"")
    assert (r.status, r.headers["Job-Status"]) == (403, "failed")
    assert (job.status, job.failure_reason) == ("failed", "stuck_or_timeout_failure")
    with pytest.raises(ValueError):
        job.fail_server_side("stuck")


def test_cancel_and_abort_of_pending_and_finished_jobs(double):
    assert double.add_job().cancel().status == "canceled"
    done = double.add_job(status="success")
    assert done.abort().cancel().status == "success"


# --- the final update (5.3) --------------------------------------------------

def test_accept_after_202s_then_200(gitlab):
    job = picked_job(gitlab, accept_after=2, update_interval=7)
    log = b"all done\n"
    assert patch(gitlab, job, log).status == 202
    answers = [put(gitlab, job, "success", log=log) for _ in range(3)]
    assert [a.status for a in answers] == [202, 202, 200]
    assert [a.body for a in answers] == [b"202", b"202", b"200"]
    assert [a.headers["X-GitLab-Trace-Update-Interval"] for a in answers] == ["7"] * 3
    assert [a.headers["Job-Status"] for a in answers] == ["running", "running", "success"]
    assert job.status == "success" and job.final["state"] == "success"
    assert job.checksum_ok and job.final_puts == 3


def test_trace_validation_fails_once_then_the_log_is_resent(gitlab):
    job = picked_job(gitlab, trace_validation_fails=True)
    log = b"line 1\nline 2\n"
    patch(gitlab, job, log)
    r = put(gitlab, job, "success", log=log)
    assert (r.status, r.body) == (412, b"412")
    assert job.log == b"" and job.trace_resets == 1 and job.status == "running"
    # The runner resets its sent offset to 0 and sends the whole log again.
    assert patch(gitlab, job, log[:7]).status == 202
    assert patch(gitlab, job, log[7:], start=7).status == 202
    assert put(gitlab, job, "success", log=log).status == 200
    assert job.status == "success" and job.log == log and job.checksum_ok


def test_checksum_mismatch_is_a_violation_for_a_picked_job(double):
    job = picked_job(double)
    patch(double, job, b"abc")
    r = put(double, job, "failed", log=b"abcd", failure_reason="script_failure", exit_code=2)
    assert r.status == 200 and job.status == "failed" and job.exit_code == 2
    assert job.checksum_ok is False
    assert "output.checksum crc32:" in job.checksum_mismatch
    assert "output.bytesize 4, the log held is 3 bytes" in job.checksum_mismatch
    assert double.violations == [f"PUT /api/v4/jobs/{job.id}: {job.checksum_mismatch}"]


def test_checksum_of_an_injected_job_is_recorded_not_a_violation(double):
    job = double.add_job(status="running")
    put(double, job, "success", output={"checksum": "crc32:0d7cf601", "bytesize": 51})
    assert job.status == "success" and job.checksum_ok is False
    assert double.violations == []
    strict = double.add_job(status="running", verify_checksum=True)
    put(double, strict, "success")
    assert "no output.checksum" in strict.checksum_mismatch
    assert len(double.violations) == 1


# --- PATCH realism (6.2) -------------------------------------------------------

def test_patch_answers_range_interval_and_416(gitlab):
    job = picked_job(gitlab, update_interval=11)
    r = patch(gitlab, job, b"hello ")
    assert (r.status, r.headers["Range"], r.headers["X-GitLab-Trace-Update-Interval"]) == \
        (202, "0-6", "11")
    job.update_interval = 2
    r = patch(gitlab, job, b"world", start=6)
    assert (r.headers["Range"], r.headers["X-GitLab-Trace-Update-Interval"]) == ("0-11", "2")
    r = patch(gitlab, job, b"again", start=3)
    assert (r.status, r.headers["Range"]) == (416, "0-11")
    assert r.json() == {"message": "416 Range Not Satisfiable"}
    assert job.log_text == "hello world"


def test_trace_size_limit_drops_the_job(gitlab):
    job = picked_job(gitlab, trace_size_limit=10)
    assert patch(gitlab, job, b"12345678").status == 202
    r = patch(gitlab, job, b"901", start=8)
    assert (r.status, r.json()) == (403, {"message": "403 Forbidden"})
    assert (job.status, job.failure_reason, job.log) == ("failed", "trace_size_exceeded",
                                                         b"12345678")
    r = put(gitlab, job, "success", log=b"12345678")
    assert (r.status, r.headers["Job-Status"]) == (403, "failed")


def test_wait_for_job_and_log_text(double):
    job = picked_job(double)
    patch(double, job, "ü\n".encode() + b"\xff")
    assert job.log_text == "ü\n\ufffd"
    with pytest.raises(TimeoutError, match="is 'running'"):
        double.wait_for_job(job, timeout=0.1)
    later = in_thread(lambda: (time.sleep(0.1), job.abort()))
    assert double.wait_for_job(job.id, "canceled", timeout=2) is job
    later.result(timeout=1)


# --- job payloads (4.5, 4.6) ----------------------------------------------------

def test_job_payload_shape():
    p = job_payload(script=["make", "make test"], after_script=["echo bye"],
                    variables={"PLAIN": "1", "SECRET": {"value": "s3cr3t-Value",
                                                        "masked": True, "public": False},
                               "KEYFILE": {"value": "k", "file": True},
                               "LIT": {"value": "$X", "raw": True}},
                    timeout=600, name="unit", stage="build", project="acme/widget",
                    ref="dev", depth=5, id=77, token="glcbt-64_tok",
                    artifacts=[{"name": "a", "paths": ["out/"], "when": "on_success"}])
    assert json.loads(json.dumps(p)) == p
    assert {"id", "token", "allow_git_fetch", "job_info", "git_info", "runner_info",
            "variables", "steps", "features", "image", "services", "cache"} <= set(p)
    assert (p["id"], p["token"], p["job_info"]["id"], p["job_info"]["name"]) == \
        (77, "glcbt-64_tok", 77, "unit")
    assert p["job_info"]["project_full_path"] == "acme/widget"
    assert p["steps"] == [
        {"name": "script", "script": ["make", "make test"], "timeout": 600,
         "when": "on_success", "allow_failure": False},
        {"name": "after_script", "script": ["echo bye"], "timeout": 600, "when": "always",
         "allow_failure": True}]
    assert p["runner_info"]["timeout"] == 600
    git = p["git_info"]
    assert git["repo_url"] == \
        "https://gitlab-ci-token:glcbt-64_tok@gitlab.example.com/acme/widget.git"
    assert (git["ref"], git["depth"], len(git["sha"])) == ("dev", 5, 40)
    assert "+refs/heads/dev:refs/remotes/origin/dev" in git["refspecs"]
    v = {x["key"]: x for x in p["variables"]}
    assert v["CI_JOB_TOKEN"] == {"key": "CI_JOB_TOKEN", "value": "glcbt-64_tok",
                                 "public": False, "masked": True}
    assert v["CI_JOB_ID"]["value"] == "77" and v["GIT_DEPTH"]["value"] == "5"
    assert v["CI_REPOSITORY_URL"]["value"] == git["repo_url"]
    assert v["PLAIN"] == {"key": "PLAIN", "value": "1", "public": True, "masked": False}
    assert v["SECRET"]["masked"] and not v["SECRET"]["public"]
    assert v["KEYFILE"]["file"] is True and v["LIT"]["raw"] is True and "raw" not in v["PLAIN"]
    assert [x["key"] for x in p["variables"]][-4:] == ["PLAIN", "SECRET", "KEYFILE", "LIT"]
    assert p["features"]["trace_sections"] is True
    assert p["features"]["failure_reasons"] == list(FAILURE_REASONS)
    assert len(FAILURE_REASONS) == 51 and "job_token_expired" in FAILURE_REASONS
    assert p["artifacts"][0]["paths"] == ["out/"]


def test_job_payload_variants_and_errors():
    p = job_payload(variables=[{"key": "A", "value": "x", "masked": True}], depth=0,
                    repo_url="file:///srv/repo.git")
    assert p["git_info"]["repo_url"] == "file:///srv/repo.git"
    assert "GIT_DEPTH" not in {x["key"] for x in p["variables"]}
    assert len(p["steps"]) == 1
    with pytest.raises(TypeError):
        job_payload(scrpt=["x"])
    with pytest.raises(ValueError):
        job_payload(variables={"A": {"value": "x", "hidden": True}})


def test_add_job_binds_the_job_identity(gitlab):
    gitlab.add_runner(token=TOKEN)
    job = gitlab.add_job(job_payload(script=["true"], id=1, token="glcbt-64_stale",
                                     credentials=[{"type": "registry", "url": "r",
                                                   "username": "gitlab-ci-token",
                                                   "password": "old"}]))
    p = request_job(gitlab).json()
    assert p == job.payload and p["id"] == job.id and p["token"] == job.token
    text = json.dumps(p)
    assert "glcbt-64_stale" not in text
    v = {x["key"]: x["value"] for x in p["variables"]}
    assert v["CI_JOB_TOKEN"] == job.token and v["CI_JOB_ID"] == str(job.id)
    assert f"gitlab-ci-token:{job.token}@" in p["git_info"]["repo_url"]
    assert v["CI_JOB_URL"].endswith(f"/-/jobs/{job.id}")
    assert p["credentials"][0]["password"] == job.token
    # add_job with a bare payload still gets the token where Rails puts it.
    bare = gitlab.add_job({"variables": []})
    assert [x["key"] for x in bare.payload["variables"]] == ["CI_JOB_ID", "CI_JOB_TOKEN"]
    with pytest.raises(TypeError):
        gitlab.add_job(acept_after=1)


# --- standalone pipeline mode ---------------------------------------------------

def test_standalone_pipeline_end_to_end(tmp_path):
    port_file, summary = tmp_path / "port", tmp_path / "summary.json"
    pipeline = tmp_path / "pipeline.json"
    pipeline.write_text(json.dumps([
        {"name": "build", "script": ["make"], "id": 100, "update_interval": 1},
        {"name": "test", "stage": "test", "script": ["make test"],
         "variables": {"API_SECRET": {"value": "s3cr3t-Value-1234", "masked": True}},
         "accept_after": 1}]))
    env = dict(os.environ, PYTHONPATH=TESTS)
    proc = subprocess.Popen([sys.executable, "-m", "gitlab_double", "--port-file", str(port_file),
                             "--runner", f"{TOKEN}:17", "--pipeline", str(pipeline),
                             "--summary", str(summary), "--long-poll", "5"],
                            env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while not port_file.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        url = port_file.read_text().strip()
        target = types.SimpleNamespace(host="127.0.0.1", port=int(url.rsplit(":", 1)[1]))
        r = request_job(target)
        assert r.headers["Gitlab-Ci-Builds-Polling"] == "yes"
        first = r.json()
        assert (first["id"], first["job_info"]["name"]) == (100, "build")
        assert first["variables"][2]["value"] == url        # CI_SERVER_URL: the double
        second = request_job(target).json()
        assert second["job_info"]["name"] == "test"
        assert request_job(target).status == 204
        for payload, outcome, log in ((first, "success", b"built\n"),
                                      (second, "failed", "tests \u00fc failed\n".encode())):
            job = types.SimpleNamespace(id=payload["id"], token=payload["token"])
            assert put(target, job, "running").status == 200
            assert patch(target, job, log).status == 202
            extra = {"failure_reason": "script_failure", "exit_code": 1} \
                if outcome == "failed" else {}
            statuses = []
            while not statuses or statuses[-1] == 202:
                statuses.append(put(target, job, outcome, log=log, **extra).status)
            assert statuses == ([200] if outcome == "success" else [202, 200])
        deadline = time.monotonic() + 5
        while not summary.exists():
            assert time.monotonic() < deadline, "no summary once every job was final"
            time.sleep(0.02)
        done = json.loads(summary.read_text())
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert done == json.loads(summary.read_text())           # rewritten at exit, same
    assert done["complete"] is True and done["violations"] == [] and done["errors"] == []
    build, test = done["jobs"]
    assert (build["id"], build["name"], build["status"], build["log"]) == \
        (100, "build", "success", "built\n")
    assert (build["failure_reason"], build["exit_code"], build["checksum_ok"]) == \
        (None, None, True)
    assert (test["name"], test["status"], test["failure_reason"], test["exit_code"]) == \
        ("test", "failed", "script_failure", 1)
    assert test["log"] == "tests \u00fc failed\n" and test["checksum_ok"] is True


def test_standalone_summary_on_sigterm_and_bad_spec(tmp_path):
    port_file, summary = tmp_path / "port", tmp_path / "summary.json"
    pipeline = tmp_path / "pipeline.json"
    pipeline.write_text(json.dumps([{"name": "never-picked"}]))
    env = dict(os.environ, PYTHONPATH=TESTS)
    proc = subprocess.Popen([sys.executable, "-m", "gitlab_double", "--port-file", str(port_file),
                             "--pipeline", str(pipeline), "--summary", str(summary)],
                            env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while not port_file.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    done = json.loads(summary.read_text())
    assert done["complete"] is False
    assert [(j["name"], j["status"], j["checksum_ok"]) for j in done["jobs"]] == \
        [("never-picked", "pending", None)]
    pipeline.write_text(json.dumps([{"name": "x", "scrpt": ["typo"]}]))
    bad = subprocess.run([sys.executable, "-m", "gitlab_double", "--port-file",
                          str(tmp_path / "p2"), "--pipeline", str(pipeline)],
                         env=env, capture_output=True, text=True, timeout=10)
    assert bad.returncode != 0 and "scrpt" in bad.stderr
