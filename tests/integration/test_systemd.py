"""The runner under systemd, as far as a test can go without systemd as PID 1.

- The notification protocol: a unix datagram socket of ours stands in for
  systemd's $NOTIFY_SOCKET and receives READY=1, STATUS=, WATCHDOG=1 at
  half of $WATCHDOG_USEC, RELOADING=1/READY=1 around SIGHUP and STOPPING=1
  on SIGQUIT; jobs do not inherit the variables.
- The unit: `systemd-analyze verify` on it (ExecStart pointed at
  build/runner; the package's own test verifies the untouched file in a
  Debian tree).  Its exact ExecStart stopped by its KillSignal is run by
  test_debian_package.py (in a chroot) and test_systemd_service.py (under
  a real systemd), where the unit's user and paths exist.
- `runner install` / `uninstall` for real, inside `unshare --mount` with a
  tmpfs over /etc/systemd/system, so the host is untouched.
"""
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading

import pytest

from daemon_helpers import (ROOT, add_job, check_run, daemons, entry, new_token,  # noqa: F401
                            wait_until)

UNIT = os.path.join(ROOT, "packaging", "systemd", "runner.service")
RUNNER = os.path.join(ROOT, "build", "runner")


def unit_settings(path=UNIT):
    """{key: [values]} of the unit file (comments and sections dropped)."""
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;[":
                continue
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


class NotifySocket:
    """What systemd listens on: a bound unix datagram socket, read at once as systemd does.

    A reader thread empties it as datagrams come: the kernel queues only
    max_dgram_qlen (10) of them, and the daemon drops what does not fit
    rather than block.
    """

    def __init__(self, directory):
        self.path = os.path.join(str(directory), "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.1)
        self.messages = []
        self._lock = threading.Lock()
        self._stop = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        while not self._stop:
            try:
                msg = self.sock.recv(4096).decode()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                self.messages.append(msg)

    def drain(self):
        """Every message so far, in order (a copy)."""
        with self._lock:
            return list(self.messages)

    def index(self, msg, start=0):
        """Position of the first msg at or after start, or -1."""
        msgs = self.drain()
        for i in range(start, len(msgs)):
            if msgs[i] == msg:
                return i
        return -1

    def wait(self, msg, start=0, timeout=15):
        """Wait for msg (at or after index start); returns its index."""
        return wait_until(lambda: self.index(msg, start) + 1, timeout,
                          f"{msg} on NOTIFY_SOCKET after message {start}; "
                          f"got {self.drain()}") - 1

    def close(self):
        self._stop = True
        self._reader.join(5)
        self.sock.close()


@pytest.fixture
def notify(tmp_path):
    s = NotifySocket(tmp_path)
    yield s
    s.close()


# ---------------------------------------------------------------------------
# the notification protocol
# ---------------------------------------------------------------------------

def test_notify_ready_watchdog_reload_stopping(gitlab, daemons, notify):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")], asan=True,
                env={"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "200000"})
    job = add_job(gitlab, r, script=[
        'echo "notify=${NOTIFY_SOCKET:-none} watchdog=${WATCHDOG_USEC:-none}"',
        "echo started", "sleep 1", "echo finished"])
    d.start()
    ready = notify.wait("READY=1")
    # Every 100 ms (half of 200 ms): several arrive while the job runs.
    first = notify.wait("WATCHDOG=1", ready)
    notify.wait("WATCHDOG=1", first + 1)
    wait_until(lambda: "started" in job.log_text, 15, "the job to start")
    notify.wait("STATUS=1 job running")
    assert "notify=none watchdog=none" in job.log_text, \
        "the job inherited the service manager's variables"

    mark = len(notify.drain())
    d.send_signal(signal.SIGHUP)
    reloading = notify.wait("RELOADING=1", mark)
    notify.wait("READY=1", reloading + 1)
    d.wait_log("config reloaded")

    mark = len(notify.drain())
    d.send_signal(signal.SIGQUIT)
    notify.wait("STOPPING=1", mark)
    assert d.wait(20) == 0
    d.assert_sanitizers_clean()
    assert job.status == "success" and "finished" in job.log_text
    statuses = [m for m in notify.drain() if m.startswith("STATUS=")]
    assert "STATUS=draining: 1 job running" in statuses
    assert statuses[-1] == "STATUS=draining: 0 jobs running"
    assert "cannot notify" not in d.stderr
    check_run(gitlab, d, [job])


def test_watchdog_of_another_process_is_not_fed(gitlab, daemons, notify):
    """A WATCHDOG_USEC meant for another process (WATCHDOG_PID) is not ours to feed."""
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")],
                env={"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "20000",
                     "WATCHDOG_PID": str(os.getpid())})
    d.start()
    notify.wait("READY=1")
    d.wait_log("runner .* starting")
    mark = len(notify.drain())
    # Had the watchdog been armed, its first tick (due at once) would come on
    # the loop's first turn, before the SIGHUP that follows READY=1 is read.
    d.send_signal(signal.SIGHUP)
    notify.wait("READY=1", mark + 1)
    assert d.stop() == 0
    assert "WATCHDOG=1" not in notify.drain()


# ---------------------------------------------------------------------------
# the unit
# ---------------------------------------------------------------------------

def unit_pointing_at(tmp_path, binary):
    """A copy of the unit whose binary is `binary` (verify wants it to exist)."""
    with open(UNIT) as f:
        text = f.read()
    copy = tmp_path / "runner.service"
    copy.write_text(text.replace("/usr/bin/runner", binary))
    return copy


def test_unit_verifies():
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is missing (packaging/install-deps.sh installs systemd)")
    with tempfile.TemporaryDirectory() as tmp:
        copy = unit_pointing_at(pathlib.Path(tmp), RUNNER)
        # --man=no: the man page is the Debian package's; its test verifies with it.
        p = subprocess.run(["systemd-analyze", "verify", "--man=no", str(copy)],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and p.stderr == "", p.stderr
        # The check can fail: verify warns about (and exits 0 for) a setting
        # it ignores, which is why stderr must be empty above.
        copy.write_text(copy.read_text().replace("KillMode=mixed", "KillMode=mixd"))
        p = subprocess.run(["systemd-analyze", "verify", "--man=no", str(copy)],
                           capture_output=True, text=True, timeout=60)
        assert "mixd" in p.stderr


def test_unit_settings():
    s = unit_settings()
    assert s["Type"] == ["notify"] and s["NotifyAccess"] == ["main"]
    assert s["KillSignal"] == ["SIGQUIT"] and s["KillMode"] == ["mixed"]
    assert s["Restart"] == ["always"]
    assert s["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert s["ExecStart"] == ["/usr/bin/runner run --working-directory /home/gitlab-runner "
                              "--config /etc/gitlab-runner/config.toml --user gitlab-runner"]
    # sudo and other setuid programs in jobs would stop working under it.
    assert "NoNewPrivileges" not in s
    # The daemon rewrites config.toml and keeps its journal beside it.
    assert "-/etc/gitlab-runner" in s["ReadWritePaths"]


# ---------------------------------------------------------------------------
# runner install / uninstall, for real, in a mount namespace
# ---------------------------------------------------------------------------

# Runs inside `unshare --mount`: a tmpfs over /etc/systemd/system, then the
# steps; prints one JSON object of what each step saw.
IN_NAMESPACE = r'''
import json, os, subprocess, sys
runner, spaced, verify = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
UNITS = "/etc/systemd/system"
subprocess.run(["mount", "--make-rprivate", "/"], check=True)
subprocess.run(["mount", "-t", "tmpfs", "tmpfs", UNITS], check=True)
out = {}

def run(name, args, as_nobody=False, binary=None):
    cmd = [binary or runner] + args
    if as_nobody:
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, cwd="/")
    out[name] = {"rc": p.returncode, "err": p.stderr}

def look(name, unit="runner.service"):
    path = os.path.join(UNITS, unit)
    d = out.setdefault(name, {})
    try:
        st = os.stat(path)
        d.update(mode=st.st_mode & 0o7777, ino=st.st_ino, text=open(path).read())
    except FileNotFoundError:
        d.update(text=None)
    d["files"] = sorted(os.listdir(UNITS))
    d["wants"] = os.path.lexists(os.path.join(UNITS, "multi-user.target.wants", unit))

run("nobody", ["install", "--user", "gitlab-runner"], as_nobody=True)
look("nobody")
run("no_user", ["install"])
look("no_user")
run("both_users", ["install", "-u", "a", "-i", "b"])
run("first", ["install", "--user", "gitlab-runner", "--working-directory", "/home/gitlab-runner"])
look("first")
run("second", ["install", "-u", "gitlab-runner", "-d", "/srv/a b"])
look("second")
with open(os.path.join(UNITS, "other.service"), "w") as f:
    f.write("[Service]\nExecStart=/bin/true\n")
run("foreign_install", ["install", "-n", "other", "-u", "gitlab-runner"])
look("foreign_install", "other.service")
run("foreign_uninstall", ["uninstall", "-n", "other"])
look("foreign_uninstall", "other.service")
run("uninstall", ["uninstall"])
look("uninstall")
run("uninstall_again", ["uninstall"])
# A binary whose path has a blank: the ExecStart systemd reads must name it.
run("spaced", ["install", "-n", "spaced", "-u", "gitlab-runner"], binary=spaced)
look("spaced", "spaced.service")
if verify:
    p = subprocess.run(["systemd-analyze", "verify", "--man=no",
                        os.path.join(UNITS, "spaced.service")], capture_output=True, text=True)
    out["verify"] = {"rc": p.returncode, "err": p.stderr}
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("setpriv") is None:
        pytest.skip("install tests need root, unshare and setpriv")
    # Readable by nobody: the non-root run must reach the binary to be refused by it.
    spaced_dir = tempfile.mkdtemp(prefix="runner bin ")
    os.chmod(spaced_dir, 0o755)
    spaced = os.path.join(spaced_dir, "runner")
    shutil.copy2(RUNNER, spaced)
    try:
        p = subprocess.run(["unshare", "--mount", sys.executable, "-c", IN_NAMESPACE, RUNNER,
                            spaced, "1" if shutil.which("systemd-analyze") else "0"],
                           capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(spaced_dir)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    out["spaced_path"] = spaced
    return out


def test_install_writes_the_packaged_unit(installed):
    first = installed["first"]
    assert first["rc"] == 0, first["err"]
    with open(UNIT) as f:
        packaged = f.read()
    # Byte for byte the packaged file, but for where this binary is.
    assert first["text"] == packaged.replace("/usr/bin/runner", os.path.realpath(RUNNER))
    assert first["mode"] == 0o644
    assert first["wants"], "systemctl enable made no link in multi-user.target.wants"


def test_install_replaces_atomically(installed):
    first, second = installed["first"], installed["second"]
    assert second["rc"] == 0, second["err"]
    assert '--working-directory "/srv/a b"' in second["text"]
    assert second["ino"] != first["ino"], "rewritten in place, not renamed over"
    assert second["mode"] == 0o644
    assert second["files"] == ["multi-user.target.wants", "runner.service"], \
        "a temporary file was left behind"


def test_install_refuses(installed):
    nobody = installed["nobody"]
    assert nobody["rc"] == 1 and "run this as root" in nobody["err"]
    assert nobody["text"] is None
    no_user = installed["no_user"]
    assert no_user["rc"] != 0 and "Please specify user" in no_user["err"]
    assert no_user["text"] is None
    assert installed["both_users"]["rc"] != 0
    assert "only one of --user and --init-user" in installed["both_users"]["err"]
    # A unit someone else wrote is neither replaced nor removed.
    for step in ("foreign_install", "foreign_uninstall"):
        assert installed[step]["rc"] == 1
        assert "not written by runner install" in installed[step]["err"]
        assert installed[step]["text"] == "[Service]\nExecStart=/bin/true\n"


def test_uninstall(installed):
    u = installed["uninstall"]
    assert u["rc"] == 0, u["err"]
    assert u["text"] is None and not u["wants"]
    again = installed["uninstall_again"]
    assert again["rc"] == 1 and "not installed" in again["err"]


def test_install_quotes_a_path_with_blanks(installed):
    spaced = installed["spaced"]
    assert spaced["rc"] == 0, spaced["err"]
    assert f'ExecStart="{installed["spaced_path"]}" run ' in spaced["text"]
    if "verify" not in installed:
        pytest.skip("systemd-analyze is missing")
    # verify checks that the ExecStart binary exists: a word split at the
    # blank would name a file that does not.
    assert installed["verify"]["rc"] == 0 and installed["verify"]["err"] == "", \
        installed["verify"]["err"]


# ---------------------------------------------------------------------------
# the thin systemctl commands
# ---------------------------------------------------------------------------

def test_service_commands_in_help():
    out = subprocess.run([RUNNER, "--help"], capture_output=True, text=True).stdout
    for cmd in ("install", "uninstall", "start", "stop", "restart", "status"):
        assert f"\n  {cmd} " in out, f"{cmd} missing from the help"


def test_systemctl_failure_is_reported_with_its_status():
    """A unit that does not exist: systemctl fails, with or without systemd running."""
    p = subprocess.run([RUNNER, "start", "-n", "runner-test-no-such-unit"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert "systemctl start runner-test-no-such-unit failed with exit status" in p.stderr
    p = subprocess.run([RUNNER, "status", "-n", "runner-test-no-such-unit"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    # systemctl's own complaint (if any) comes first, then gitlab-runner's line.
    assert p.stderr.splitlines()[-1] in ("runner-test-no-such-unit: Service has stopped",
                                         "runner-test-no-such-unit: Service status unknown")
    p = subprocess.run([RUNNER, "stop", "-n", "bad/name"], capture_output=True, text=True)
    assert p.returncode == 2 and "not a service name" in p.stderr
