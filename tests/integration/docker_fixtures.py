"""Images and configuration for the docker executor's tests, on the private dockerd.

The engine is packaging_fixtures' docker_host (dockerd.sh: its own socket
and data root, no bridge, no iptables), started once per run.  Images come
from this machine only: the Debian base of `make rootfs` imported as
runner-test/runtime:1, and runner-test/busybox:1 made of Debian's
busybox-static (no bash, no libc: a job image unlike the helper's).
"""
import io
import os
import re
import subprocess
import tarfile

import pytest

from packaging_fixtures import ROOTFS, Docker

RUNTIME_IMAGE = "runner-test/runtime:1"
BUSYBOX_IMAGE = "runner-test/busybox:1"
BUSYBOX = "/usr/bin/busybox"
MANAGED = "label=com.gitlab.gitlab-runner.managed=true"
CACHE_VOLUME = re.compile(r"-cache-[0-9a-f]{32}(-protected)?$")   # kept, as gitlab-runner keeps them


def _busybox_tar():
    applets = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True,
                             check=True).stdout.split()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for d in ("bin", "tmp", "etc", "root"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            t.addfile(info)
        t.add(BUSYBOX, arcname="bin/busybox")
        for a in applets:
            if a != "busybox":
                info = tarfile.TarInfo(f"bin/{a}")
                info.type, info.linkname = tarfile.SYMTYPE, "busybox"
                t.addfile(info)
        passwd = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size = len(passwd)
        t.addfile(info, io.BytesIO(passwd))
    return buf.getvalue()


@pytest.fixture(scope="session")
def docker_images(docker_host):
    """The two job images on the private engine, imported once."""
    d = Docker(docker_host)
    if d("image", "inspect", RUNTIME_IMAGE, check=False).returncode != 0:
        tar = subprocess.Popen(["tar", "-C", os.path.join(ROOTFS, "runtime"), "-c", "."],
                               stdout=subprocess.PIPE)
        p = subprocess.run(["docker", "import", "-", RUNTIME_IMAGE], stdin=tar.stdout,
                           env=d.env, capture_output=True, text=True, timeout=300)
        tar.wait()
        if p.returncode != 0:
            pytest.fail(f"docker import {RUNTIME_IMAGE}: {p.stderr}", pytrace=False)
    if d("image", "inspect", BUSYBOX_IMAGE, check=False).returncode != 0:
        p = subprocess.run(["docker", "import", "-", BUSYBOX_IMAGE], input=_busybox_tar(),
                           env=d.env, capture_output=True, timeout=120)
        if p.returncode != 0:
            pytest.fail(f"docker import {BUSYBOX_IMAGE}: {p.stderr.decode()}", pytrace=False)
    return d


def docker_entry(gitlab, runner, name, docker_host, **docker):
    """A [[runners]] entry of the docker executor on the private engine, offline."""
    from daemon_helpers import entry

    e = entry(gitlab, runner, name, executor="docker")
    e.pop("shell")
    settings = {"host": docker_host, "image": RUNTIME_IMAGE, "helper_image": RUNTIME_IMAGE,
                "pull_policy": "if-not-present", "network_mode": "host"}
    settings.update(docker)
    e["docker"] = settings
    return e


def leftovers(d, system_id=None):
    """Containers, networks and volumes of this runner on the engine, but the
    helper bundle (read-only, one per binary, kept by design) and caches."""
    flt = MANAGED if system_id is None else \
        f"label=com.gitlab.gitlab-runner.runner.system_id={system_id}"
    out = {}
    out["containers"] = d("ps", "-a", "--filter", flt, "--format", "{{.Names}}").stdout.split()
    out["networks"] = d("network", "ls", "--filter", flt, "--format", "{{.Name}}").stdout.split()
    out["volumes"] = [v for v in d("volume", "ls", "--filter", flt, "--format",
                                   "{{.Name}}").stdout.split()
                      if not v.startswith("runner-helper-") and not CACHE_VOLUME.search(v)]
    return {k: v for k, v in out.items() if v}
