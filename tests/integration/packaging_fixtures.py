"""Fixtures of the packaging tests shared by several modules.

conftest.py imports them, so each session fixture is made once for the
whole run (defined in a test module and imported by another, it would be
made once per module: two dockerd start-ups and two pairs of .debs).

- docker_host / docker: the private dockerd of packaging/container
  (dockerd.sh: state under build/docker/, no bridge, no iptables), started
  once and stopped at the end if this run started it;
- debs: `make deb` for V1 and for the higher V2 of the upgrade tests.
"""
import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CTR = os.path.join(ROOT, "packaging", "container")
ROOTFS = os.path.join(ROOT, "build", "rootfs")
VERSION = open(os.path.join(ROOT, "VERSION")).read().strip()
V1 = f"{VERSION}-1"
V2 = f"{VERSION}+upgrade1-1"        # sorts after V1 (dpkg --compare-versions is checked)


class Docker:
    def __init__(self, host):
        self.env = dict(os.environ, DOCKER_HOST=host, DOCKER_BUILDKIT="0")
        self.names = []

    def __call__(self, *args, check=True, timeout=120):
        p = subprocess.run(["docker", *args], env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        if check and p.returncode != 0:
            pytest.fail(f"docker {' '.join(args)}: exit {p.returncode}\n{p.stderr}",
                        pytrace=False)
        return p

    def popen(self, *args):
        return subprocess.Popen(["docker", *args], env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def inspect(self, name):
        return json.loads(self("inspect", name).stdout)[0]

    def logs(self, name):
        p = self("logs", name, check=False)
        return p.stdout + p.stderr

    def name(self, base):
        """A container name of this test run, removed at teardown."""
        n = f"runner-test-{base}-{os.getpid()}-{len(self.names)}"
        self.names.append(n)
        return n


@pytest.fixture(scope="session")
def docker_host():
    if os.geteuid() != 0:
        pytest.fail("the container tests start dockerd and need root", pytrace=False)
    for v in ("build", "runtime"):
        if not os.path.isfile(os.path.join(ROOTFS, v, ".rootfs-stamp")):
            pytest.fail(f"no Debian base in {ROOTFS}/{v}: run `make rootfs`", pytrace=False)
    host = subprocess.run([os.path.join(CTR, "dockerd.sh"), "host"], capture_output=True,
                          text=True, check=True).stdout.strip()
    env = dict(os.environ, DOCKER_HOST=host)
    was_running = subprocess.run(["docker", "version"], env=env,
                                 capture_output=True).returncode == 0
    p = subprocess.run([os.path.join(CTR, "dockerd.sh"), "start"], capture_output=True,
                       text=True, timeout=120)
    if p.returncode != 0:
        pytest.fail(f"dockerd did not start:\n{p.stderr}", pytrace=False)
    try:
        yield host
    finally:
        if not was_running:
            subprocess.run([os.path.join(CTR, "dockerd.sh"), "stop"], timeout=300)


@pytest.fixture
def docker(docker_host):
    d = Docker(docker_host)
    yield d
    for n in d.names:
        d("rm", "-f", "-v", n, check=False)


@pytest.fixture(scope="session")
def debs(tmp_path_factory):
    """{version: path of the .deb}: `make deb` for V1 and V2, built side by side."""
    out = tmp_path_factory.mktemp("deb")
    assert subprocess.run(["dpkg", "--compare-versions", V2, "gt", V1]).returncode == 0
    builds = {v: subprocess.Popen(["make", "-s", "deb", f"DEB_VERSION={v}", f"DEB_DIR={out}"],
                                  cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
              for v in (V1, V2)}
    paths = {}
    for v, p in builds.items():
        log, _ = p.communicate(timeout=600)
        assert p.returncode == 0, f"make deb DEB_VERSION={v} failed:\n{log[-4000:]}"
        paths[v] = log.strip().splitlines()[-1]
        assert os.path.basename(paths[v]) == f"runner_{v}_amd64.deb", log
        assert os.path.isfile(paths[v])
    return paths
