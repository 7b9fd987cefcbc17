"""The Debian package under a real systemd: the issue's "done when", for real.

A container of the fresh Debian 12 tree (build/rootfs/runtime, which holds
systemd) runs /lib/systemd/systemd as PID 1, in the private dockerd of the
container tests, with host networking so that the GitLab double on
127.0.0.1 is reachable.  Inside it, as a user would:
`apt-get install ./runner_*.deb` (the package's own scripts enable and
start the service through systemd), `runner register`, a job, then
`systemctl stop` while the job runs, and an upgrade to a higher version
while a job runs.  systemd itself sends the unit's KillSignal, waits for
READY/STOPPING, applies the hardening and restarts on upgrade.

The chroot tests (test_debian_package.py) cover lintian, the files, remove
and purge; the unit's own tests are in test_systemd.py.
"""
import os
import subprocess

import pytest

from daemon_helpers import add_job, job_requests_of, new_token, wait_until
from packaging_fixtures import CTR, V1, V2, VERSION

BASE = "runner-base-runtime:bookworm"      # imported by build-image.sh from build/rootfs/runtime
# PrivateTmp=yes gives the service its own /tmp: the job waits on a file in
# the home, which the service and `docker exec` share.
RELEASE = "/home/gitlab-runner/release"
HOLD = ['echo "user=$(id -un)"', "echo started", f"while [ ! -e {RELEASE} ]; do sleep 0.1; done", "echo finished"]


@pytest.fixture(scope="module")
def base(docker_host):
    """The runtime tree as an image (build-image.sh imports it; so does this, if needed)."""
    env = dict(os.environ, DOCKER_HOST=docker_host)
    if subprocess.run(["docker", "image", "inspect", BASE], env=env,
                      capture_output=True).returncode != 0:
        p = subprocess.run([os.path.join(CTR, "build-image.sh"), "--offline", "runner:test"],
                           env=env, capture_output=True, text=True, timeout=1800)
        assert p.returncode == 0, p.stderr[-4000:]
    return BASE


class Machine:
    """A container with systemd as PID 1: the fresh Debian 12 machine."""

    def __init__(self, docker, base):
        self.docker = docker
        self.name = docker.name("systemd")
        # systemd needs to mount (SYS_ADMIN) and a writable /run; the cgroup
        # tree is the host's, read-only, as systemd's container interface says.
        docker("run", "-d", "--name", self.name, "--network", "host",
               "--cap-add", "SYS_ADMIN", "--security-opt", "seccomp=unconfined",
               "--tmpfs", "/run", "--tmpfs", "/run/lock",
               "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro", base, "/lib/systemd/systemd")
        wait_until(lambda: self.sh("systemctl is-system-running", check=False).stdout.strip()
                   in ("running", "degraded"), 60, "systemd to boot in the container")

    def sh(self, script, check=True, timeout=120):
        p = self.docker("exec", self.name, "sh", "-c", script, check=False, timeout=timeout)
        if check:
            assert p.returncode == 0, f"{script}: exit {p.returncode}\n{p.stdout}\n{p.stderr}"
        return p

    def popen(self, script):
        return self.docker.popen("exec", self.name, "sh", "-c", script)

    def copy_in(self, path):
        self.docker("cp", path, f"{self.name}:/root/")
        return "/root/" + os.path.basename(path)

    def show(self, prop):
        return self.sh(f"systemctl show -P {prop} runner").stdout.strip()

    def journal(self):
        return self.sh("journalctl -u runner --no-pager -o cat", check=False).stdout


@pytest.fixture
def machine(docker, base):
    return Machine(docker, base)


def start_job(machine, gitlab, r):
    job = add_job(gitlab, r, script=HOLD)
    wait_until(lambda: "started" in job.log_text, 60,
               f"the job to start; the service's journal:\n{machine.journal()}")
    return job


def test_install_register_run_and_stop_drains_under_systemd(machine, gitlab, debs):
    deb = machine.copy_in(debs[V1])
    machine.sh(f"cd /root && apt-get install -y ./{os.path.basename(deb)}")
    # The package's scripts enabled and started it through systemd, before
    # any config: it waits for one (Type=notify: active means READY=1 came).
    assert machine.show("ActiveState") == "active", machine.journal()
    assert machine.show("UnitFileState") == "enabled"
    assert machine.show("StatusText") == "0 jobs running"
    assert "does not exist yet" in machine.journal()

    r = gitlab.add_runner(token=new_token())
    machine.sh(f"runner register -n --url {gitlab.url} --token {r.token} "
               "--executor shell --name systemd-1")
    # The service loads the file by itself (its config watch), no restart.
    wait_until(lambda: job_requests_of(gitlab, r.token), 30,
               f"the service to ask for jobs; journal:\n{machine.journal()}")
    pid = machine.show("MainPID")

    job = start_job(machine, gitlab, r)
    assert machine.show("StatusText") == "1 job running"
    # The daemon runs as root; the job as gitlab-runner (--user), under the hardening.
    assert "user=gitlab-runner" in job.log_text, job.log_text
    # systemctl stop waits for the drain: SIGQUIT to the daemon alone.
    stop = machine.popen("systemctl stop runner")
    wait_until(lambda: "SIGQUIT" in machine.journal(), 30, "systemd's KillSignal")
    assert stop.poll() is None and job.status == "running"
    assert machine.show("ActiveState") == "deactivating"
    machine.sh(f"touch {RELEASE}")
    out, err = stop.communicate(timeout=120)
    assert stop.returncode == 0, err
    assert job.status == "success" and "finished" in job.log_text, job.report()
    assert machine.show("Result") == "success", machine.journal()
    assert machine.show("ExecMainStatus") == "0"
    assert machine.show("ActiveState") == "inactive"
    assert pid != "0"
    assert r.token not in machine.journal()

    # SIGHUP through systemctl reload: RELOADING=1 ... READY=1.
    machine.sh("systemctl start runner")
    machine.sh("systemctl reload runner")
    wait_until(lambda: "config reloaded (SIGHUP)" in machine.journal(), 30, "the reload")
    assert machine.show("ActiveState") == "active"


def test_upgrade_restarts_the_service_after_its_jobs_drain(machine, gitlab, debs):
    machine.sh(f"cd /root && apt-get install -y ./{os.path.basename(machine.copy_in(debs[V1]))}")
    r = gitlab.add_runner(token=new_token())
    machine.sh(f"runner register -n --url {gitlab.url} --token {r.token} "
               "--executor shell --name systemd-up")
    wait_until(lambda: job_requests_of(gitlab, r.token), 30, "the service to ask for jobs")
    old_pid = machine.show("MainPID")
    job = start_job(machine, gitlab, r)

    deb2 = machine.copy_in(debs[V2])
    apt = machine.popen(f"cd /root && apt-get install -y ./{os.path.basename(deb2)}")
    # The new files are in place; the restart waits for the old daemon's job.
    wait_until(lambda: "SIGQUIT" in machine.journal(), 60, "the upgrade's restart to drain")
    assert apt.poll() is None and job.status == "running", machine.journal()
    machine.sh(f"touch {RELEASE}")
    out, err = apt.communicate(timeout=180)
    assert apt.returncode == 0, out + err
    assert job.status == "success" and "finished" in job.log_text, job.report()

    assert machine.show("ActiveState") == "active"
    assert machine.show("MainPID") != old_pid
    version = machine.sh("runner --version").stdout
    assert f"{VERSION}+upgrade1" in version, version
    machine.sh(f"rm -f {RELEASE}")
    nxt = add_job(gitlab, r, script=["echo on the new version"])
    gitlab.wait_for_job(nxt, "success", timeout=60)
