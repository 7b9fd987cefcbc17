"""`runner health-check`, as gitlab-runner's (commands/helpers/health_check.go):
-p PORT on localhost waits for every port; without it, *_TCP_ADDR and every
*_TCP_PORT of the environment, the first port to answer ends the wait."""
import os
import socket
import subprocess
import threading
import time

from conftest import ROOT

RUNNER = os.path.join(ROOT, "build", "runner")


def clean_env(**more):
    env = {k: v for k, v in os.environ.items()
           if not k.endswith("_TCP_ADDR") and not k.endswith("_TCP_PORT")}
    env.update(more)
    return env


def health_check(args=(), env=None, timeout=20):
    return subprocess.run([RUNNER, "health-check"] + list(args), capture_output=True, text=True,
                          env=env if env is not None else clean_env(), timeout=timeout)


def listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s, str(s.getsockname()[1])


def free_port():
    s, port = listener()
    s.close()
    return port


def listen_later(port, after):
    """Listen on port after `after` seconds; returns the thread (its socket in .sock)."""
    t = threading.Thread(target=lambda: (time.sleep(after), setattr(t, "sock", _bind(port))))
    t.start()
    return t


def _bind(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(port)))
    s.listen()
    return s


def test_nothing_to_check_is_fatal():
    r = health_check()
    assert r.returncode == 1
    assert "No HOST or PORT found" in r.stderr
    # An address without a port (or a port without an address) is no better.
    assert health_check(env=clean_env(DB_PORT_5432_TCP_ADDR="127.0.0.1")).returncode == 1
    assert health_check(env=clean_env(DB_PORT_5432_TCP_PORT="5432")).returncode == 1


def test_environment_address_and_port():
    s, port = listener()
    try:
        r = health_check(env=clean_env(DB_PORT_5432_TCP_ADDR="127.0.0.1",
                                       DB_PORT_5432_TCP_PORT=port))
    finally:
        s.close()
    assert r.returncode == 0, r.stderr
    assert r.stdout == (f"waiting for TCP connection to 127.0.0.1 on [{port}]...\n"
                        f"dialing 127.0.0.1:{port}...\n"
                        f"dial succeeded on 127.0.0.1:{port}. Exiting...\n")


def test_environment_waits_for_the_first_port_to_answer():
    closed = free_port()
    s, port = listener()
    try:
        r = health_check(env=clean_env(A_TCP_ADDR="127.0.0.1", A_TCP_PORT=closed,
                                       B_TCP_PORT=port))
    finally:
        s.close()
    assert r.returncode == 0, r.stderr
    assert f"dial succeeded on 127.0.0.1:{port}. Exiting...\n" in r.stdout
    assert f"dial succeeded on 127.0.0.1:{closed}" not in r.stdout


def test_a_service_that_starts_late_is_dialled_again():
    port = free_port()
    t = listen_later(port, 1.5)
    t0 = time.monotonic()
    r = health_check(env=clean_env(SVC_TCP_ADDR="127.0.0.1", SVC_TCP_PORT=port))
    t.join()
    t.sock.close()
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 >= 1.4
    assert r.stdout.count(f"dialing 127.0.0.1:{port}...\n") >= 2
    assert r.stdout.endswith(f"dial succeeded on 127.0.0.1:{port}. Exiting...\n")


def test_port_flags_wait_for_every_port_on_localhost():
    s, up = listener()
    late = free_port()
    t = listen_later(late, 1.5)
    try:
        r = health_check(["-p", up, "--port", late])
    finally:
        t.join()
        t.sock.close()
        s.close()
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"waiting for TCP connection to localhost on [{up} {late}]...\n")
    assert f"dial succeeded on localhost:{up}. Exiting...\n" in r.stdout
    assert f"dial succeeded on localhost:{late}. Exiting...\n" in r.stdout
    assert r.stdout.count(f"dialing localhost:{up}...") == 1


def test_a_value_with_an_equals_sign_is_not_read():
    # health_check.go splits each variable on "=" and skips what is not two parts.
    s, port = listener()
    try:
        r = health_check(env=clean_env(A_TCP_ADDR="127.0.0.1", A_TCP_PORT=port,
                                       B_TCP_ADDR="x=y"))
    finally:
        s.close()
    assert r.returncode == 0, r.stderr
    assert "to 127.0.0.1 on" in r.stdout
