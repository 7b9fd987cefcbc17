"""The docker executor's transport (executors/docker/engine.c, attach.c,
frames.c) against a real dockerd, through build/asan/tools/engine_call.

The daemon is the private one of packaging/container/dockerd.sh (the
docker_host fixture: no bridge, so containers use network none).  The
image is a busybox-static root imported here; nothing is pulled.  A small
fake engine on a unix socket stands in for daemons this machine does not
have (too old, no Api-Version header).

Needs root (dockerd does).
"""
import http.server
import json
import os
import shutil
import socketserver
import subprocess
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENGINE_CALL = os.path.join(ROOT, "build", "asan", "tools", "engine_call")
IMAGE = "runner-test/busybox:1"
BUSYBOX = "/bin/busybox"


def engine_call(host, *args, input=None, timeout=60):
    return subprocess.run([ENGINE_CALL, host, *args], input=input, capture_output=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def busybox(docker_host, tmp_path_factory):
    """runner-test/busybox:1, a busybox-static root with sh and friends."""
    if not os.access(ENGINE_CALL, os.X_OK):
        pytest.fail(f"{ENGINE_CALL} is missing: run make tools", pytrace=False)
    if not os.path.isfile(BUSYBOX):
        pytest.fail("no /bin/busybox: packaging/install-deps.sh installs busybox-static",
                    pytrace=False)
    root = tmp_path_factory.mktemp("busybox")
    os.makedirs(root / "bin")
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for tool in ("sh", "echo", "cat", "head", "tr", "wc", "sleep", "true", "false"):
        os.symlink("busybox", root / "bin" / tool)
    env = dict(os.environ, DOCKER_HOST=docker_host)
    tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    p = subprocess.run(["docker", "import", "-c", 'CMD ["sh"]', "-", IMAGE], stdin=tar.stdout,
                       env=env, capture_output=True, text=True, timeout=120)
    tar.stdout.close()
    assert tar.wait() == 0
    if p.returncode != 0:
        pytest.fail(f"docker import: {p.stderr}", pytrace=False)
    return docker_host


def our_containers(host):
    p = subprocess.run(["docker", "ps", "-aq", "--filter", f"ancestor={IMAGE}"],
                       env=dict(os.environ, DOCKER_HOST=host), capture_output=True, text=True,
                       check=True)
    return p.stdout.split()


def test_ping_negotiates_this_daemons_version(docker_host):
    # Debian 12's docker.io speaks 1.41, our oldest: that is what is used.
    p = engine_call(docker_host, "ping")
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"1.41\n"


def test_run_separates_streams_and_returns_the_exit_code(busybox):
    p = engine_call(busybox, "run", IMAGE,
                    "echo out-line; echo err-line >&2; echo second-out; exit 5\n")
    assert p.stdout == b"out-line\nsecond-out\n"
    assert p.stderr == b"err-line\n"
    assert p.returncode == 5
    assert our_containers(busybox) == []


def test_run_exit_zero_and_script_without_newline(busybox):
    p = engine_call(busybox, "run", IMAGE, "echo ok")
    assert (p.returncode, p.stdout, p.stderr) == (0, b"ok\n", b"")


def test_two_mib_of_output_survive(busybox):
    n = 2 * 1024 * 1024
    p = engine_call(busybox, "run", IMAGE,
                    f"head -c {n} /dev/zero | tr '\\0' x; echo; "
                    f"head -c {n} /dev/zero | tr '\\0' y >&2; exit 3")
    assert p.returncode == 3, p.stderr[-500:]
    assert p.stdout == b"x" * n + b"\n"
    assert p.stderr == b"y" * n
    assert our_containers(busybox) == []


def test_a_large_script_reaches_the_shell_whole(busybox):
    # 2 MiB of stdin: more than the socket takes at once, so it is written in parts.
    lines = ("a" * 1023 + "\n") * 2048
    p = engine_call(busybox, "run", IMAGE, "-",
                    input=f"wc -c <<'EOF'\n{lines}EOF\necho end >&2\n".encode())
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(len(lines)).encode()
    assert p.stderr == b"end\n"


def test_missing_image_is_the_daemons_message(busybox):
    p = engine_call(busybox, "run", "runner-test/none:1", "true")
    assert p.returncode == 125
    assert p.stderr.decode() == "engine_call: create: No such image: runner-test/none:1\n"


def test_call_gives_status_and_message(docker_host):
    p = engine_call(docker_host, "call", "GET", "/containers/runner-test-nope/json")
    assert p.returncode == 1
    status, body = p.stdout.split(b"\n", 1)
    assert status == b"404"
    assert json.loads(body)["message"] == "No such container: runner-test-nope"
    assert p.stderr == b"engine_call: No such container: runner-test-nope\n"

    p = engine_call(docker_host, "call", "GET", "/version")
    assert p.returncode == 0
    assert json.loads(p.stdout.split(b"\n", 1)[1])["ApiVersion"] == "1.41"


def test_missing_socket_is_one_line_naming_the_path(tmp_path):
    sock = tmp_path / "no" / "docker.sock"
    p = engine_call(f"unix://{sock}", "ping")
    assert p.returncode == 125
    err = p.stderr.decode()
    assert err.count("\n") == 1, err
    assert f"cannot connect to the Docker engine at unix://{sock}" in err
    assert "No such file or directory" in err


def test_unsupported_hosts_are_refused(tmp_path):
    for host in ("ssh://me@build-host", "npipe:////./pipe/docker_engine"):
        p = engine_call(host, "ping")
        assert p.returncode == 125
        err = p.stderr.decode()
        assert err.count("\n") == 1 and host in err, err


# ---- a fake engine for versions this machine's daemon does not have ----

class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def fake_engine(path, ping_headers, version_body):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            body = b"OK" if self.path == "/_ping" else json.dumps(version_body).encode()
            self.send_response(200)
            if self.path == "/_ping":
                for k, v in ping_headers.items():
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

        def address_string(self):
            return "unix"

    srv = _UnixServer(str(path), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_too_old_engine_is_refused_with_the_reason(tmp_path):
    sock = tmp_path / "old.sock"
    srv = fake_engine(sock, {"Api-Version": "1.40"}, {})
    try:
        p = engine_call(f"unix://{sock}", "ping")
    finally:
        srv.shutdown()
        srv.server_close()
    assert p.returncode == 125
    err = p.stderr.decode()
    assert err.count("\n") == 1, err
    assert f"the Docker engine at unix://{sock}" in err
    assert "1.40, older than 1.41" in err


def test_version_from_version_when_the_ping_has_no_header(tmp_path):
    sock = tmp_path / "nohdr.sock"
    srv = fake_engine(sock, {}, {"ApiVersion": "1.43", "MinAPIVersion": "1.12"})
    try:
        p = engine_call(f"unix://{sock}", "ping")
        newer = fake_engine(tmp_path / "new.sock", {"Api-Version": "1.52"}, {})
        try:
            q = engine_call(f"unix://{tmp_path / 'new.sock'}", "ping")
        finally:
            newer.shutdown()
            newer.server_close()
    finally:
        srv.shutdown()
        srv.server_close()
    assert (p.returncode, p.stdout) == (0, b"1.43\n"), p.stderr
    # A newer daemon: the newest this client writes bodies for.
    assert (q.returncode, q.stdout) == (0, b"1.47\n"), q.stderr
