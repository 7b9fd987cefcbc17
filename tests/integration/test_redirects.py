"""A token is bound to the origin it was issued for (issue 14, item 2).

The GitLab double answers each endpoint with 301, 302, 303, 307 or 308 to
a second loopback server on another port that records every request; no
request reaching it may carry Job-Token, Runner-Token, Private-Token or
Authorization, nor a token anywhere in its URL, headers or body.  A body
with a token in it is never sent there at all; what may go (a log patch,
an artifact, a download from object storage) goes without the token
headers.  Redirects to the same origin keep the token, and https never
becomes http.

The clients are the real ones: build/tools/api_call for the daemon's calls
(it drives the same api/ code), build/runner for the commands.
"""
import io
import json
import os
import re
import subprocess
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import ROOT
from daemon_helpers import config_text, daemons, entry  # noqa: F401  (daemons: a fixture)

API_CALL = os.path.join(ROOT, "build", "tools", "api_call")
RUNNER = os.path.join(ROOT, "build", "runner")
ASAN_API_CALL = os.path.join(ROOT, "build", "asan", "tools", "api_call")
ASAN_RUNNER = os.path.join(ROOT, "build", "asan", "runner")
ASAN_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
STATUSES = (301, 302, 303, 307, 308)
TOKEN_HEADERS = ("job-token", "runner-token", "private-token", "authorization")
RUNNER_TOKEN = "glrt-t1_RedirectRunnerTokenAbc"
REG_TOKEN = "GR1348941RedirectRegistration"
PAT = "glpat-RedirectPatAbcdefghij"
SIGNATURE = "SigOfThePresignedUrl0123456789"


def archive():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("from-storage.txt", "stored\n")
    return buf.getvalue()


class Recorder:
    """Another origin: answers everything, remembers every request as it came."""

    def __init__(self):
        self.requests = []
        self.zip = archive()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                recorder.requests.append({"method": self.command, "target": self.path,
                                          "headers": list(self.headers.items()),
                                          "body": body})
                if self.command == "GET" and self.path.startswith("/object/"):
                    status, ctype, out = 200, "application/zip", recorder.zip
                else:
                    status, ctype = (200 if self.command == "GET" else 201), "application/json"
                    out = b"{}"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def other():
    r = Recorder()
    yield r
    r.stop()


@pytest.fixture
def world(gitlab, tmp_path):
    """A runner, a running job, a registration token, a PAT and a config naming them."""
    runner = gitlab.add_runner(token=RUNNER_TOKEN, id=41)
    job = gitlab.add_job(status="running", runner=runner)
    gitlab.registration_tokens.add(REG_TOKEN)
    gitlab.pats[PAT] = True
    cfg = tmp_path / "config.toml"
    cfg.write_text(config_text([entry(gitlab, runner, "rd", id=runner.id)]))
    (tmp_path / "a.txt").write_text("artifact\n")
    return {"runner": runner, "job": job, "cfg": str(cfg), "dir": str(tmp_path),
            "secrets": [RUNNER_TOKEN, REG_TOKEN, PAT, job.token]}


def run(args, cwd=None, env=None):
    full = dict(os.environ)
    full.pop("CI_JOB_TOKEN", None)
    full.pop("CONFIG_FILE", None)
    full.update(env or {})
    p = subprocess.run([str(a) for a in args], cwd=cwd, env=full, capture_output=True,
                       text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


# name: (method, path of the double, token in the body, command)
ENDPOINTS = {
    "jobs/request": ("POST", r"^/api/v4/jobs/request$", True,
                     lambda g, w: [API_CALL, g.url, RUNNER_TOKEN, "request"]),
    "update job": ("PUT", r"^/api/v4/jobs/\d+$", True,
                   lambda g, w: [API_CALL, g.url, w["job"].token, "update", w["job"].id,
                                 "running"]),
    "patch trace": ("PATCH", r"^/api/v4/jobs/\d+/trace$", False,
                    lambda g, w: [API_CALL, g.url, w["job"].token, "patch", w["job"].id, 0,
                                  "log line\n"]),
    "verify": ("POST", r"^/api/v4/runners/verify$", True,
               lambda g, w: [API_CALL, g.url, RUNNER_TOKEN, "verify"]),
    "discovery": ("GET", r"^/api/v4/runners/router/discovery$", False,
                  lambda g, w: [API_CALL, g.url, RUNNER_TOKEN, "discovery", 1]),
    "register": ("POST", r"^/api/v4/runners$", True,
                 lambda g, w: [RUNNER, "register", "-n", "-c", w["dir"] + "/new.toml",
                               "--url", g.url, "-r", REG_TOKEN, "--executor", "shell"]),
    "unregister": ("DELETE", r"^/api/v4/runners(/managers)?$", True,
                   lambda g, w: [RUNNER, "unregister", "-c", w["cfg"], "--name", "rd"]),
    "reset token": ("POST", r"^/api/v4/runners/reset_authentication_token$", True,
                    lambda g, w: [RUNNER, "reset-token", "-c", w["cfg"], "--name", "rd"]),
    "reset token with a PAT": ("POST", r"^/api/v4/runners/\d+/reset_authentication_token$",
                               False,
                               lambda g, w: [RUNNER, "reset-token", "-c", w["cfg"], "--name",
                                             "rd", "--pat", PAT]),
    "artifacts upload": ("POST", r"^/api/v4/jobs/\d+/artifacts$", False,
                         lambda g, w: [RUNNER, "artifacts-uploader", "--url", g.url, "--id",
                                       w["job"].id, "--path", "a.txt"]),
    "artifacts download": ("GET", r"^/api/v4/jobs/\d+/artifacts$", False,
                           lambda g, w: [RUNNER, "artifacts-downloader", "--url", g.url,
                                         "--id", w["job"].id]),
}


def assert_tokenless(req, secrets):
    names = [k.lower() for k, _ in req["headers"]]
    for h in TOKEN_HEADERS:
        assert h not in names, f"{h} reached another origin: {req}"
    raw = req["target"] + "\n" + "\n".join(f"{k}: {v}" for k, v in req["headers"]) + "\n"
    raw += req["body"].decode("latin-1")
    for s in secrets:
        assert s not in raw, f"a token reached another origin: {req}"


@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize("name", list(ENDPOINTS))
def test_nothing_with_a_token_reaches_another_origin(gitlab, world, other, name, status):
    method, path, token_body, command = ENDPOINTS[name]
    target = "/object/artifacts.zip?X-Amz-Signature=" + SIGNATURE \
        if name == "artifacts download" else "/elsewhere?from=gitlab"
    gitlab.script(method=method, path=path, times=None, status=status,
                  headers={"Location": other.url + target})
    rc, out = run(command(gitlab, world), cwd=world["dir"],
                  env={"CI_JOB_TOKEN": world["job"].token})
    for req in other.requests:
        assert_tokenless(req, world["secrets"])
    for s in world["secrets"]:
        assert s not in out, f"a token in the output: {out}"
    assert gitlab.requests_for(method, path), gitlab.summary()
    if token_body and status != 303:
        # The body would carry the token there: refused, said so, nothing sent.
        assert other.requests == [], other.requests
        assert "refused: the request body carries a token" in out, out
        return
    # Followed, without the tokens: 303 as a GET without a body (RFC 9110 15.4.4).
    assert other.requests, f"the {status} was not followed: {out}"
    want = "GET" if status == 303 else method
    assert {r["method"] for r in other.requests} == {want}, other.requests
    if status == 303:
        assert all(r["body"] == b"" for r in other.requests)
    if name == "artifacts download":
        # Object storage's presigned URL needs no token: the download works.
        assert rc == 0, out
        assert open(os.path.join(world["dir"], "from-storage.txt")).read() == "stored\n"
        assert other.requests[0]["target"].endswith("X-Amz-Signature=" + SIGNATURE)
    if name == "artifacts upload" and status != 303:
        # The same bytes GitLab was sent, just without the job token.
        assert rc == 0, out
        sent = gitlab.requests_for("POST", path)[0].body
        assert len(sent) > 100 and other.requests[0]["body"] == sent


def api_call(*args):
    rc, out = run([API_CALL] + list(args))
    assert rc == 0, out
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return lines[-1], out


@pytest.mark.parametrize("status", (301, 302, 307, 308))
@pytest.mark.parametrize("relative", (False, True))
def test_a_redirect_to_the_same_origin_keeps_the_token_and_the_body(gitlab, world, status,
                                                                    relative):
    job = world["job"]
    path = f"/api/v4/jobs/{job.id}"
    gitlab.script(method="PUT", path=rf"^{path}$", times=1, status=status,
                  headers={"Location": path if relative else gitlab.url + path})
    res, out = api_call(gitlab.url, job.token, "update", job.id, "running")
    assert res["result"] == "ok" and res["status"] == 200, out
    puts = gitlab.requests_for("PUT", rf"^{path}$")
    assert [p.response_status for p in puts] == [status, 200]
    assert all(p.headers.get("Job-Token") == job.token for p in puts)
    assert puts[0].body == puts[1].body and json.loads(puts[1].body)["token"] == job.token
    assert job.token not in out


def test_a_303_to_the_same_origin_is_a_get_with_the_token(gitlab, world):
    gitlab.script(method="GET", path=r"/runners/router/discovery$", times=1, status=303,
                  headers={"Location": "/api/v4/runners/router/discovery"})
    _, out = api_call(gitlab.url, RUNNER_TOKEN, "discovery", 1)
    gets = gitlab.requests_for("GET", r"/runners/router/discovery$")
    assert [g.response_status for g in gets][0] == 303 and len(gets) == 2, gitlab.summary()
    assert all(g.headers.get("Runner-Token") == RUNNER_TOKEN for g in gets)
    assert RUNNER_TOKEN not in out


def test_https_never_becomes_http(gitlab_tls, tls_files, other):
    runner = gitlab_tls.add_runner(token=RUNNER_TOKEN, id=42)
    job = gitlab_tls.add_job(status="running", runner=runner)
    # A log patch carries no token in its body: only the downgrade stops it.
    gitlab_tls.script(method="PATCH", path=r"/trace$", times=None, status=307,
                      headers={"Location": other.url + "/trace"})
    res, out = api_call("--ca", tls_files.ca_cert, gitlab_tls.url, job.token, "patch",
                        job.id, 0, "log line\n")
    assert res["result"] != "ok", out
    assert other.requests == []
    assert re.search(r"HTTP 307 redirect from https://127\.0\.0\.1:\d+ to "
                     r"http://127\.0\.0\.1:\d+ refused: it would go from https to plain "
                     r"http", out), out
    assert job.token not in out


def test_a_cross_origin_redirect_is_logged_at_debug_with_both_origins_only(gitlab, world,
                                                                          other):
    job = world["job"]
    gitlab.script(method="GET", path=r"/jobs/\d+/artifacts$", times=1, status=302,
                  headers={"Location": f"{other.url}/object/a.zip?X-Amz-Signature={SIGNATURE}"})
    rc, out = run([RUNNER, "--debug", "artifacts-downloader", "--url", gitlab.url, "--id",
                   job.id], cwd=world["dir"], env={"CI_JOB_TOKEN": job.token})
    assert rc == 0, out
    line = next((ln for ln in out.splitlines() if "redirect from" in ln), None)
    assert line is not None, out
    # Both URLs are http://127.0.0.1:PORT: exactly the origins, nothing after them.
    assert f"HTTP 302 redirect from {gitlab.url} to {other.url}, another origin, " \
        "token headers dropped" in line, line
    assert SIGNATURE not in out and job.token not in out
    assert [r["method"] for r in other.requests] == ["GET"]
    assert_tokenless(other.requests[0], world["secrets"])


@pytest.mark.parametrize("status", (303, 307))
def test_the_daemon_keeps_its_token_home(gitlab, other, daemons, status):
    runner = gitlab.add_runner(token=RUNNER_TOKEN, id=43)
    gitlab.script(method="POST", path=r"^/api/v4/jobs/request$", times=None, status=status,
                  headers={"Location": other.url + "/jobs/request"})
    d = daemons(gitlab, [entry(gitlab, runner, "rd")], asan=True)
    d.start()
    if status == 307:
        d.wait_log(r"jobs/request: HTTP 307 redirect from http://127\.0\.0\.1:\d+ to "
                   r"http://127\.0\.0\.1:\d+ refused: the request body carries a token")
    else:
        gitlab.wait_for(lambda: other.requests, timeout=30)
    gitlab.wait_for(lambda: len(gitlab.requests_for("POST", r"/jobs/request$")) >= 2,
                    timeout=30)
    d.stop()
    if status == 307:
        assert other.requests == []
    for req in other.requests:
        assert (req["method"], req["body"]) == ("GET", b"")
        assert_tokenless(req, [RUNNER_TOKEN])
    d.assert_no_tokens()


def test_redirects_under_asan(gitlab, world, other):
    job = world["job"]
    gitlab.script(method="PATCH", path=r"/trace$", times=1, status=307,
                  headers={"Location": other.url + "/trace"})
    gitlab.script(method="PUT", path=r"/jobs/\d+$", times=1, status=308,
                  headers={"Location": f"/api/v4/jobs/{job.id}"})
    gitlab.script(method="POST", path=r"/runners/verify$", times=1, status=302,
                  headers={"Location": other.url + "/verify"})
    gitlab.script(method="GET", path=r"/jobs/\d+/artifacts$", times=1, status=302,
                  headers={"Location": other.url + "/object/a.zip?X-Amz-Signature=s"})
    env = {"ASAN_OPTIONS": "detect_leaks=1", "CI_JOB_TOKEN": job.token}
    for args in ([ASAN_API_CALL, gitlab.url, job.token, "patch", job.id, 0, "x" * 70000],
                 [ASAN_API_CALL, gitlab.url, job.token, "update", job.id, "running"],
                 [ASAN_API_CALL, gitlab.url, RUNNER_TOKEN, "verify"],
                 [ASAN_RUNNER, "artifacts-downloader", "--url", gitlab.url, "--id", job.id]):
        rc, out = run(args, cwd=world["dir"], env=env)
        assert rc == 0, out
        for marker in ASAN_MARKERS:
            assert marker not in out, out
    assert [r["method"] for r in other.requests] == ["PATCH", "GET"]
    for req in other.requests:
        assert_tokenless(req, world["secrets"])
