"""The transport with real parts around it: nginx (TLS, HTTP/2, limit_req)
in front of the double, and a forward proxy named by the environment."""
import json
import os
import socket
import socketserver
import subprocess
import threading

import pytest

from conftest import ROOT
from nginx_front import NginxFront

API_CALL = os.path.join(ROOT, "build", "tools", "api_call")
TOKEN = "glrt-t1_TransportToken000000"


def run_api_call(*args, env=None, timeout=60):
    p = subprocess.run([API_CALL] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=timeout, env=dict(os.environ, **(env or {})))
    assert p.returncode == 0, p.stderr
    return [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")], p.stderr


@pytest.fixture
def front(gitlab, tls_files, tmp_path):
    gitlab.add_runner(token=TOKEN, id=41)
    n = NginxFront(tmp_path / "nginx", gitlab.port, tls_files).start()
    yield n
    n.stop()


def test_http2_and_one_connection_for_many_requests(front, tls_files, gitlab):
    lines, err = run_api_call("--ca", tls_files.ca_cert, front.url, TOKEN, "verify", 6)
    assert [l["result"] for l in lines] == ["ok"] * 6, err
    log = front.access_log()
    assert len(log) == 6
    # HTTP/2 because the server offered it, and one TLS connection for all.
    assert {entry[1] for entry in log} == {"HTTP/2.0"}
    assert len({entry[0] for entry in log}) == 1
    assert len(gitlab.requests) == 6 and gitlab.violations == []


def test_untrusted_certificate_fails_at_once(front):
    lines, err = run_api_call(front.url, TOKEN, "verify")
    assert lines[0]["result"] == "failed" and lines[0]["status"] == 0
    assert "certificate" in err.lower()
    # A certificate problem does not go away by asking again.
    assert "waiting" not in err
    assert front.access_log() == []


def test_rate_limited_by_nginx_backs_off_and_gets_through(gitlab, tls_files, tmp_path):
    runners = 3
    for i in range(runners):
        gitlab.add_runner(token=f"{TOKEN}{i}", id=60 + i)
    # 3 runners asking 4 times a second each, nginx letting 3 a second through.
    n = NginxFront(tmp_path / "nginx", gitlab.port, tls_files, rate=3).start()
    try:
        lines, err = run_api_call("--ca", tls_files.ca_cert, n.url, TOKEN, "poll", runners, 8,
                                  timeout=120)
    finally:
        n.stop()
    pollers = [l for l in lines if "poller" in l]
    log = n.access_log()
    limited = [e for e in log if e[4] == "429"]
    assert limited, "nginx never limited: the test does not test anything"
    # nginx answers 429 without Retry-After: the client backs off and retries.
    assert "(backoff)" in err
    # The crowd gets through: a limiter decides who wins a slot, so no single
    # runner is promised one, but most rounds end in an answer, not a give-up.
    answered = sum(p["none"] for p in pollers)
    given_up = sum(p["failed"] for p in pollers)
    assert answered >= 6 and answered > given_up, pollers
    # Every request that got through reached the double and was answered.
    passed = [e for e in log if e[4] == "204"]
    assert len(passed) == len(gitlab.requests)
    assert gitlab.violations == []


class _Proxy(socketserver.ThreadingTCPServer):
    """A forward proxy for plain HTTP: absolute-form requests, one at a time."""
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.seen = []


class _ProxyHandler(socketserver.StreamRequestHandler):
    def handle(self):
        while True:
            line = self.rfile.readline()
            if not line:
                return
            method, target, version = line.decode().split()
            headers, length = [], 0
            while True:
                h = self.rfile.readline()
                if h in (b"\r\n", b"\n", b""):
                    break
                if h.lower().startswith(b"content-length:"):
                    length = int(h.split(b":", 1)[1])
                if not h.lower().startswith(b"proxy-"):
                    headers.append(h)
            body = self.rfile.read(length)
            self.server.seen.append((method, target))
            host, _, rest = target.split("//", 1)[1].partition("/")
            hostname, port = host.split(":")
            with socket.create_connection((hostname, int(port))) as up:
                up.sendall(f"{method} /{rest} {version}\r\n".encode() + b"".join(headers)
                           + b"Connection: close\r\n\r\n" + body)
                f = up.makefile("rb")
                status = f.readline()
                out, clen = [status], 0
                while True:
                    h = f.readline()
                    out.append(h)
                    if h.lower().startswith(b"content-length:"):
                        clen = int(h.split(b":", 1)[1])
                    if h in (b"\r\n", b""):
                        break
                out.append(f.read(clen))
            self.wfile.write(b"".join(out))


def test_proxy_from_the_environment(gitlab):
    gitlab.add_runner(token=TOKEN, id=42)
    proxy = _Proxy()
    t = threading.Thread(target=proxy.serve_forever, daemon=True)
    t.start()
    try:
        env = {"http_proxy": f"http://127.0.0.1:{proxy.server_address[1]}", "no_proxy": ""}
        lines, err = run_api_call(gitlab.url, TOKEN, "verify", env=env)
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert lines[0]["result"] == "ok", err
    assert proxy.seen == [("POST", f"{gitlab.url}/api/v4/runners/verify")]
    assert len(gitlab.requests) == 1 and gitlab.violations == []


def test_connection_max_age_renews_connections(front, tls_files):
    # Older than max age: a new connection (and TLS handshake) per request.
    # libcurl counts a connection's age in whole seconds, hence 2.1 s for 1 s.
    lines, err = run_api_call("--ca", tls_files.ca_cert, "--max-age", 1000, "--pause", 2100,
                              front.url, TOKEN, "verify", 3)
    assert [l["result"] for l in lines] == ["ok"] * 3, err
    aged = [e[0] for e in front.access_log()]
    assert len(aged) == 3 and len(set(aged)) == 3
    # Within it: the connection is kept.
    lines, err = run_api_call("--ca", tls_files.ca_cert, "--max-age", 60000, "--pause", 1300,
                              front.url, TOKEN, "verify", 3)
    kept = [e[0] for e in front.access_log()[3:]]
    assert len(kept) == 3 and len(set(kept)) == 1


def test_unreadable_tls_file_is_named_and_nothing_is_sent(front, tmp_path):
    missing = tmp_path / "nope" / "ca.pem"
    lines, err = run_api_call("--ca", missing, front.url, TOKEN, "verify")
    assert lines[0]["result"] == "client error"
    assert lines[0]["message"] == f"cannot read tls-ca-file {missing}: No such file or directory"
    assert front.access_log() == []
