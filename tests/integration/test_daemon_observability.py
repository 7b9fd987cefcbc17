"""`runner run` as an operator sees it from outside: /metrics, /health, and
the job router's discovery with FF_USE_JOB_ROUTER."""
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import ROOT
from daemon_helpers import without_sources
from gitlab_double import job_payload

RUNNER = os.path.join(ROOT, "build", "runner")
TOKEN = "glrt-t1_ObservabilityToken00"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(cond, timeout=20, what="a condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


class Daemon:
    def __init__(self, tmp_path, gitlab, extra_global="", extra_runner=""):
        self.dir = tmp_path
        self.cfg = tmp_path / "config.toml"
        self.cfg.write_text(f'concurrent = 2\ncheck_interval = 1\n{extra_global}\n'
                            f'[[runners]]\nname = "obs"\nurl = "{gitlab.url}"\n'
                            f'token = "{TOKEN}"\nexecutor = "shell"\n{extra_runner}\n')
        self.err = open(tmp_path / "stderr", "w+")
        env = dict(os.environ, RUNNER_TRACE_INTERVAL_MS="200")
        self.proc = subprocess.Popen([RUNNER, "run", "-c", str(self.cfg), "-d", str(tmp_path)],
                                     stderr=self.err, env=env)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.err.flush()
        return (self.dir / "stderr").read_text()


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_metrics_and_health(gitlab, tmp_path):
    port = free_port()
    r = gitlab.add_runner(token=TOKEN, id=71)
    d = Daemon(tmp_path, gitlab, extra_global=f'listen_address = "127.0.0.1:{port}"')
    try:
        base = f"http://127.0.0.1:{port}"
        wait(lambda: get_or_none(base + "/health/live") == 200, what="/health/live")
        wait(lambda: get_or_none(base + "/health/ready") == 200, what="/health/ready")
        job = gitlab.add_job(job_payload(variables=without_sources(), script=["echo metrics please"]), runner=r)
        gitlab.wait_for_job(job, timeout=20)
        wait(lambda: 'runner_jobs_finished_total{state="success"} 1' in get(base + "/metrics")[1],
             what="the finished job in /metrics")
        status, text = get(base + "/metrics")
        assert status == 200
        assert "# TYPE runner_api_requests_total counter" in text
        assert 'runner_api_requests_total{method="POST",endpoint="/jobs/request",status="201"} 1' in text
        assert f'endpoint="/jobs/{{id}}",status="200"' in text
        assert "runner_jobs_running 0" in text
        assert "runner_trace_bytes_sent_total" in text
        assert 'runner_job_request_duration_seconds_count{result="received"} 1' in text
        assert "process_resident_memory_bytes" in text and "process_open_fds" in text
        assert TOKEN not in text and job.token not in text
        assert get(base + "/nope")[0] == 404
    finally:
        log = d.stop()
    assert f"metrics and health on 127.0.0.1:{port}" in log
    assert gitlab.violations == [] and job.checksum_ok


def get_or_none(url):
    try:
        return get(url)[0]
    except OSError:
        return None


def test_bad_listen_address_is_named_and_jobs_still_run(gitlab, tmp_path):
    r = gitlab.add_runner(token=TOKEN, id=72)
    d = Daemon(tmp_path, gitlab, extra_global='listen_address = "nowhere:99999"')
    try:
        job = gitlab.add_job(job_payload(variables=without_sources(), script=["echo still working"]), runner=r)
        gitlab.wait_for_job(job, timeout=20)
        assert job.status == "success"
    finally:
        log = d.stop()
    assert "listen_address:" in log and "nowhere:99999" in log


def test_job_router_discovery_then_direct_polling(gitlab, tmp_path):
    gitlab.router_url = "wss://kas.example.com/-/kubernetes-agent/"
    r = gitlab.add_runner(token=TOKEN, id=73)
    d = Daemon(tmp_path, gitlab, extra_runner="[runners.feature_flags]\nFF_USE_JOB_ROUTER = true")
    try:
        job = gitlab.add_job(job_payload(variables=without_sources(), script=["echo via direct polling"]), runner=r)
        gitlab.wait_for_job(job, timeout=20)
        wait(lambda: len(gitlab.requests_for("POST", r"/jobs/request$")) >= 3,
             what="more job requests")
    finally:
        log = d.stop()
    assert job.status == "success"
    # Discovery first, once: its answer is kept for an hour.
    disc = gitlab.requests_for("GET", r"/runners/router/discovery$")
    assert len(disc) == 1 and disc[0].headers["Runner-Token"] == TOKEN
    assert gitlab.requests[0].path.endswith("/runners/router/discovery")
    assert log.count("GitLab offers a job router at wss://kas.example.com/-/kubernetes-agent/") == 1


def test_no_discovery_without_the_feature_flag(gitlab, tmp_path):
    gitlab.router_url = "wss://kas.example.com/-/kubernetes-agent/"
    r = gitlab.add_runner(token=TOKEN, id=74)
    d = Daemon(tmp_path, gitlab)
    try:
        job = gitlab.add_job(job_payload(variables=without_sources(), script=["true"]), runner=r)
        gitlab.wait_for_job(job, timeout=20)
    finally:
        d.stop()
    assert gitlab.requests_for("GET", r"/runners/router/discovery$") == []


def test_daemon_clean_under_valgrind(gitlab, tmp_path):
    """One job, a cancel and a SIGQUIT under valgrind: no invalid access, no leak."""
    import shutil
    if shutil.which("valgrind") is None:
        pytest.fail("valgrind is missing: packaging/install-deps.sh installs it")
    r = gitlab.add_runner(token=TOKEN, id=75)
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'concurrent = 2\ncheck_interval = 1\n[[runners]]\nname = "vg"\n'
                   f'url = "{gitlab.url}"\ntoken = "{TOKEN}"\nexecutor = "shell"\n')
    vg = ["valgrind", "--quiet", "--leak-check=full", "--show-leak-kinds=definite,indirect",
          "--errors-for-leak-kinds=definite,indirect", "--error-exitcode=99",
          "--trace-children=no", RUNNER, "run", "-c", str(cfg), "-d", str(tmp_path)]
    err = open(tmp_path / "stderr", "w+")
    env = dict(os.environ, RUNNER_TRACE_INTERVAL_MS="300", RUNNER_KEEPALIVE_MS="1000",
               RUNNER_KILL_GRACE_MS="1000")
    proc = subprocess.Popen(vg, stderr=err, env=env)
    try:
        ok = gitlab.add_job(job_payload(script=["echo under valgrind", "seq 1 2000"],
                                        variables=without_sources({"V": {"value": "valgrind-secret-1",
                                                                         "masked": True}})), runner=r)
        gitlab.wait_for_job(ok, timeout=60)
        slow = gitlab.add_job(job_payload(variables=without_sources(), script=["echo started", "sleep 30"],
                                          after_script=["echo after"]), runner=r)
        wait(lambda: "started" in slow.log_text, timeout=60, what="the second job to start")
        slow.cancel()
        gitlab.wait_for_job(slow, timeout=60)
    finally:
        proc.send_signal(signal.SIGQUIT)
        rc = proc.wait(60)
    err.seek(0)
    log = err.read()
    assert rc == 0, log[-4000:]
    assert ok.status == "success" and slow.status == "canceled"
    assert ok.checksum_ok and slow.checksum_ok and gitlab.violations == []
