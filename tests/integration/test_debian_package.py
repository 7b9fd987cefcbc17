"""The Debian package (`make deb`) on a fresh Debian 12 tree.

The .deb is built once per session (and a second one with a higher version
for the upgrade), then each test installs it with apt-get, offline, into its
own throwaway copy of build/rootfs/runtime (chroot_helpers.Chroot; `make
test` makes the tree with packaging/rootfs.sh first).  No systemd runs in a
chroot, so the service's part is played from the installed unit file: its
exact ExecStart line is run inside, and its KillSignal is sent to that
process alone, as systemd does with KillMode=mixed.
"""
import gzip
import hashlib
import os
import re
import shlex
import signal
import stat
import subprocess

import pytest

from chroot_helpers import BASE_ENV, COMMAND_ENV, Chroot, unit_settings
from conftest import ROOT
from daemon_helpers import add_job, new_token, wait_until
from packaging_fixtures import V1, V2, VERSION

ROOTFS = os.path.join(ROOT, "build", "rootfs", "runtime")
UNIT = "/lib/systemd/system/runner.service"
CONFIG = "/etc/gitlab-runner/config.toml"


# ---------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------

@pytest.fixture
def chroot(tmp_path):
    if not os.path.isfile(os.path.join(ROOTFS, ".rootfs-stamp")):
        pytest.fail(f"{ROOTFS} is missing: run `make rootfs` (an install step)",
                    pytrace=False)
    c = Chroot(ROOTFS, tmp_path)
    yield c
    c.close()


def apt_install(c, deb, env=None):
    """`apt-get install ./runner_*.deb`, as the README says, inside; offline."""
    name = os.path.basename(deb)
    with open(deb, "rb") as src, open(c.path(f"/root/{name}"), "wb") as dst:
        dst.write(src.read())
    return c.run(["sh", "-c", f"cd /root && apt-get install -y ./{name}"], env=env)


@pytest.fixture
def installed(chroot, debs):
    apt_install(chroot, debs[V1])
    return chroot


def mode(c, inside):
    return stat.S_IMODE(os.stat(c.path(inside)).st_mode)


def exec_start(c):
    """The installed unit's ExecStart as argv, and its KillSignal."""
    service = unit_settings(c.read(UNIT))["Service"]
    line = service["ExecStart"]
    assert not line.startswith("@"), line
    argv = shlex.split(line.lstrip("-+!:"))
    sig = signal.Signals[service.get("KillSignal", "SIGTERM")]
    return argv, sig


def register(c, gitlab):
    r = gitlab.add_runner(token=new_token())
    c.run(["runner", "register", "-n", "--url", gitlab.url, "--token", r.token,
           "--executor", "shell", "--name", "deb-1"])
    return r


class Service:
    """The unit's ExecStart running inside the chroot, its stderr in a file."""

    def __init__(self, c, tmp_path, name="service"):
        self.argv, self.kill_signal = exec_start(c)
        self.log_path = tmp_path / f"{name}.log"
        with open(self.log_path, "w") as log:
            self.proc = c.popen(self.argv, env=BASE_ENV, stdout=log, stderr=log)
        c.write("/run/runner-test.pid", f"{self.proc.pid}\n")

    @property
    def log(self):
        return self.log_path.read_text(errors="replace")

    def running(self):
        return self.proc.poll() is None

    def wait(self, timeout=30):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the service did not exit in {timeout} s; its log:\n{self.log}",
                        pytrace=False)


# A job that runs until the test lets it finish: no timing in the test.
HOLD = ['echo "user=$(id -un)"', "echo started",
        "while [ ! -e /tmp/release ]; do sleep 0.1; done", "echo finished"]


def wait_started(job, svc):
    wait_until(lambda: "started" in job.log_text or not svc.running(), 60,
               "the job to start")
    assert svc.running(), svc.log


# ---------------------------------------------------------------------------
# the package
# ---------------------------------------------------------------------------

def test_lintian_reports_no_errors(debs):
    p = subprocess.run(["lintian", "--info", debs[V1]], capture_output=True, text=True,
                       timeout=300)
    tags = [ln for ln in p.stdout.splitlines() if re.match(r"^[EWIPXON]: ", ln)]
    errors = [t for t in tags if t.startswith("E: ")]
    assert errors == [], "\n".join(tags)
    assert p.returncode == 0, p.stdout + p.stderr


def _man_tags(roff):
    """The words of the .TP tags of the COMMANDS section of a man page."""
    words, section, lines = set(), None, roff.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(".SH "):
            section = line[4:].strip().strip('"')
        elif section == "COMMANDS" and line == ".TP" and i + 1 < len(lines):
            tag = lines[i + 1].replace("\\-", "-")
            words |= set(re.findall(r"[a-z][a-z-]*", re.sub(r"^\.\w+\s*", "", tag)))
    return words


def test_man_page_describes_every_command_of_help(debs, tmp_path):
    subprocess.run(["dpkg-deb", "-x", debs[V1], str(tmp_path)], check=True)
    with gzip.open(tmp_path / "usr/share/man/man1/runner.1.gz", "rt") as f:
        roff = f.read()
    out = subprocess.run([str(tmp_path / "usr/bin/runner"), "--help"], capture_output=True,
                         text=True, check=True).stdout
    block = out.split("Commands:", 1)[1].split("\n\n", 1)[0]
    commands = [ln.split()[0] for ln in block.splitlines() if ln.strip()]
    assert "run" in commands and "register" in commands, out
    missing = [c for c in commands if c not in _man_tags(roff)]
    assert missing == [], f"commands of `runner --help` not in runner.1: {missing}"
    # The page tells how a purge takes the user's files too.
    assert "RUNNER_PURGE_HOME=yes apt\\-get purge runner" in roff


def test_install_offline(installed):
    c = installed
    out = c.run(["runner", "--version"]).stdout
    assert re.search(rf"^Version:\s+{re.escape(VERSION)}$", out, re.M), out
    pw = c.run(["getent", "passwd", "gitlab-runner"]).stdout.strip().split(":")
    assert pw[5:] == ["/home/gitlab-runner", "/bin/bash"], pw
    assert int(pw[2]) < 1000, "not a system user"
    home = os.stat(c.path("/home/gitlab-runner"))
    assert stat.S_ISDIR(home.st_mode) and home.st_uid == int(pw[2])
    assert os.listdir(c.path("/home/gitlab-runner")) == [], "files from /etc/skel"
    assert stat.S_ISDIR(os.stat(c.path("/etc/gitlab-runner")).st_mode)
    assert mode(c, "/etc/gitlab-runner") == 0o700
    with open(os.path.join(ROOT, "packaging/systemd/runner.service")) as f:
        assert c.read(UNIT) == f.read()
    wants = "/etc/systemd/system/multi-user.target.wants/runner.service"
    assert os.readlink(c.path(wants)) == UNIT
    assert os.path.isfile(c.path("/usr/share/man/man1/runner.1.gz"))
    with open(os.path.join(ROOT, "config.toml.example")) as f:
        assert c.read("/usr/share/doc/runner/config.toml.example") == f.read()
    # man-db is not in the runtime tree, so the Documentation=man: check is off.
    v = c.run(["systemd-analyze", "verify", "--man=no", UNIT], check=False)
    assert v.returncode == 0 and v.stderr.strip() == "", v.stderr
    # The dependencies were all there: apt installed nothing else.
    status = c.run(["dpkg-query", "-W", "-f", "${Package} ${Status}\\n", "runner"]).stdout
    assert status.strip() == "runner install ok installed"


def test_register_then_unit_drains_on_kill_signal(installed, gitlab, tmp_path):
    c = installed
    r = register(c, gitlab)
    assert mode(c, CONFIG) == 0o600
    assert r.token in c.read(CONFIG)
    svc = Service(c, tmp_path)
    assert svc.argv[:2] == ["/usr/bin/runner", "run"] and "--user" in svc.argv
    job = add_job(gitlab, r, script=HOLD)
    wait_started(job, svc)
    svc.proc.send_signal(svc.kill_signal)
    wait_until(lambda: "SIGQUIT" in svc.log or not svc.running(), 15,
               f"the service to take {svc.kill_signal.name}")
    late = add_job(gitlab, r, script=["echo must not run"])
    assert svc.running() and job.status == "running", svc.log
    c.write("/tmp/release", "")
    assert svc.wait() == 0, svc.log
    assert job.status == "success", job.report()
    assert "user=gitlab-runner" in job.log_text and "finished" in job.log_text
    assert late.status == "pending"
    # builds/ under the unit's working directory, owned by the job's user.
    assert os.path.isdir(c.path("/home/gitlab-runner/builds"))


def _stub_systemd(c, sig):
    """deb-systemd-invoke as systemd would act on it, with /run/systemd/system present.

    It records each call and the installed runner's version at that moment;
    a restart sends the unit's KillSignal to the running service and waits
    until it has drained and exited, as `systemctl restart` does.
    """
    os.makedirs(c.path("/run/systemd/system"), exist_ok=True)
    c.write("/usr/bin/deb-systemd-invoke", f"""#!/bin/sh
echo "$* $(/usr/bin/runner --version | head -1 | tr -s ' ')" >>/run/invoke.log
case "$1" in
restart|stop)
	pid=$(cat /run/runner-test.pid)
	kill -{int(sig)} "$pid" || exit 0
	n=0
	while [ -d /proc/$pid ] && [ "$(cut -d' ' -f3 /proc/$pid/stat)" != Z ] && [ $n -lt 1200 ]; do
		sleep 0.1; n=$((n + 1))
	done
	echo "drained" >>/run/invoke.log ;;
esac
""", mode=0o755)


def test_upgrade_restarts_after_unpack_and_the_job_drains(installed, gitlab, debs, tmp_path):
    c = installed
    r = register(c, gitlab)
    before = hashlib.sha256(c.read(CONFIG).encode()).hexdigest()
    svc = Service(c, tmp_path, "v1")
    job = add_job(gitlab, r, script=HOLD)
    wait_started(job, svc)
    _stub_systemd(c, svc.kill_signal)

    name = os.path.basename(debs[V2])
    with open(debs[V2], "rb") as src, open(c.path(f"/root/{name}"), "wb") as dst:
        dst.write(src.read())
    apt = c.popen(["sh", "-c", f"cd /root && apt-get install -y ./{name}"], env=COMMAND_ENV,
                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = lambda: c.read("/run/invoke.log") if os.path.exists(c.path("/run/invoke.log")) else ""
    wait_until(lambda: log() or apt.poll() is not None, 120, "the upgrade's restart")
    # The restart came after the new files were unpacked; no stop came before it.
    new_version = VERSION + "+upgrade1"
    assert log().splitlines() == [f"restart runner.service Version: {new_version}"], log()
    # The upgrade waits for the drain: the old daemon still runs its job.
    wait_until(lambda: "SIGQUIT" in svc.log or not svc.running(), 15, "the drain signal")
    assert svc.running() and apt.poll() is None and job.status == "running", svc.log
    c.write("/tmp/release", "")
    wait_until(lambda: svc.proc.poll() is not None, 30, "the old daemon to drain")
    out, _ = apt.communicate(timeout=60)
    assert apt.returncode == 0, out
    assert svc.proc.returncode == 0, svc.log
    assert log().splitlines()[-1] == "drained"
    assert job.status == "success" and "finished" in job.log_text, job.report()

    out = c.run(["runner", "--version"]).stdout
    assert re.search(rf"^Version:\s+{re.escape(new_version)}$", out, re.M), out
    assert hashlib.sha256(c.read(CONFIG).encode()).hexdigest() == before
    assert mode(c, CONFIG) == 0o600 and mode(c, "/etc/gitlab-runner") == 0o700
    # The new version's service takes the next job.
    os.remove(c.path("/tmp/release"))
    svc2 = Service(c, tmp_path, "v2")
    nxt = add_job(gitlab, r, script=["echo new daemon"])
    gitlab.wait_for_job(nxt, "success", timeout=60)
    svc2.proc.send_signal(svc2.kill_signal)
    assert svc2.wait() == 0, svc2.log


def test_remove_keeps_config_purge_removes_it_but_not_the_user(installed, gitlab):
    c = installed
    register(c, gitlab)
    os.makedirs(c.path("/home/gitlab-runner/builds"))
    c.run(["apt-get", "remove", "-y", "runner"])
    assert not os.path.exists(c.path("/usr/bin/runner"))
    assert os.path.isfile(c.path(CONFIG)) and mode(c, CONFIG) == 0o600
    c.run(["apt-get", "purge", "-y", "runner"])
    assert not os.path.exists(c.path("/etc/gitlab-runner"))
    assert not os.path.lexists(c.path("/etc/systemd/system/multi-user.target.wants/runner.service"))
    assert c.run(["getent", "passwd", "gitlab-runner"], check=False).returncode == 0
    assert os.path.isdir(c.path("/home/gitlab-runner/builds"))


def test_purge_with_runner_purge_home_removes_the_user(installed):
    c = installed
    os.makedirs(c.path("/home/gitlab-runner/builds"))
    c.run(["apt-get", "purge", "-y", "runner"], env=dict(COMMAND_ENV, RUNNER_PURGE_HOME="yes"))
    assert not os.path.exists(c.path("/etc/gitlab-runner"))
    assert c.run(["getent", "passwd", "gitlab-runner"], check=False).returncode == 2
    assert not os.path.exists(c.path("/home/gitlab-runner"))
