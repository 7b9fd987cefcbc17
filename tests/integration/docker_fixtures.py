"""Engines, images and configuration for the docker executor's tests.

Two engines, each started once per run: packaging_fixtures' docker_host
(dockerd.sh: its own socket and data root, no bridge, no iptables) and
Debian's podman (`podman system service`, its own root and socket), so
the same job suite runs on both.  Images come from this machine only: the
Debian base of `make rootfs` imported as runner-test/runtime:1, and
runner-test/busybox:1 made of Debian's busybox-static (no bash, no libc:
a job image unlike the helper's).  The registry (Debian's docker-registry
with htpasswd) gets the busybox image pushed by dockerd.
"""
import os
import re
import subprocess

import pytest

from images import BUSYBOX_IMAGE, RUNTIME_IMAGE, busybox_tar
from packaging_fixtures import ROOTFS, Docker

MANAGED = "label=com.gitlab.gitlab-runner.managed=true"
CACHE_VOLUME = re.compile(r"-cache-[0-9a-f]{32}(-protected)?$")   # kept, as gitlab-runner keeps them


def _import_images(d, importer):
    """The two job images, with importer(tar_stream_or_bytes, name) -> CompletedProcess."""
    if d("image", "inspect", RUNTIME_IMAGE, check=False).returncode != 0:
        tar = subprocess.Popen(["tar", "-C", os.path.join(ROOTFS, "runtime"), "-c", "."],
                               stdout=subprocess.PIPE)
        p = importer(tar.stdout, RUNTIME_IMAGE)
        tar.wait()
        if p.returncode != 0:
            pytest.fail(f"import {RUNTIME_IMAGE}: {p.stderr}", pytrace=False)
    if d("image", "inspect", BUSYBOX_IMAGE, check=False).returncode != 0:
        p = importer(busybox_tar(), BUSYBOX_IMAGE)
        if p.returncode != 0:
            pytest.fail(f"import {BUSYBOX_IMAGE}: {p.stderr}", pytrace=False)


@pytest.fixture(scope="session")
def docker_images(docker_host):
    """The two job images on the private dockerd, imported once."""
    d = Docker(docker_host)
    def importer(data, name):
        return subprocess.run(["docker", "import", "-", name], env=d.env, timeout=300,
                              capture_output=True, **({"stdin": data} if not
                                                      isinstance(data, bytes) else
                                                      {"input": data}))
    _import_images(d, importer)
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


class Registry:
    """Debian's docker-registry on 127.0.0.1 with htpasswd users, holding one image."""

    def __init__(self, address, users, image):
        self.address = address          # "127.0.0.1:PORT"
        self.users = users              # {user: password}
        self.image = image              # "127.0.0.1:PORT/runner-test/busybox:1"

    def auth_config(self, user, password=None):
        """A DOCKER_AUTH_CONFIG value naming this registry."""
        import base64
        import json

        raw = f"{user}:{password if password is not None else self.users[user]}"
        return json.dumps({"auths": {self.address: {
            "auth": base64.b64encode(raw.encode()).decode()}}})


@pytest.fixture(scope="session")
def registry(docker_images, tmp_path_factory):
    import socket
    import time

    from gitlab_double.payloads import new_job_token

    d = docker_images
    work = tmp_path_factory.mktemp("registry")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    users = {"ci-user": "ci-pass-" + os.urandom(6).hex(), "gitlab-ci-token": new_job_token()}
    with open(work / "htpasswd", "w") as f:
        for u, p in users.items():
            f.write(subprocess.run(["htpasswd", "-Bbn", u, p], capture_output=True, text=True,
                                   check=True).stdout.strip() + "\n")
    (work / "config.yml").write_text(
        "version: 0.1\n"
        f"storage:\n  filesystem:\n    rootdirectory: {work}/data\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
        f"auth:\n  htpasswd:\n    realm: runner-tests\n    path: {work}/htpasswd\n")
    log = open(work / "registry.log", "w")
    p = subprocess.Popen(["docker-registry", "serve", str(work / "config.yml")], stdout=log,
                         stderr=log, stdin=subprocess.DEVNULL)
    try:
        import urllib.error
        import urllib.request

        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1)
            except urllib.error.HTTPError as e:
                if e.code == 401:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            pytest.fail(f"docker-registry did not start: {(work / 'registry.log').read_text()}",
                        pytrace=False)
        # Push the busybox image with a CLI config of its own, then drop the tag.
        image = f"127.0.0.1:{port}/runner-test/busybox:1"
        env = dict(d.env, DOCKER_CONFIG=str(work / "cli"))
        for args in (["login", "-u", "ci-user", "--password-stdin", f"127.0.0.1:{port}"],
                     ["tag", BUSYBOX_IMAGE, image], ["push", image], ["rmi", image]):
            r = subprocess.run(["docker", *args], env=env, capture_output=True, text=True,
                               input=users["ci-user"] if args[0] == "login" else None,
                               timeout=120)
            if r.returncode != 0:
                pytest.fail(f"docker {' '.join(args)}: {r.stderr}", pytrace=False)
        yield Registry(f"127.0.0.1:{port}", users, image)
    finally:
        p.terminate()
        p.wait(10)
        log.close()


@pytest.fixture(scope="session")
def podman_engine(registry, tmp_path_factory):
    """Debian's podman as a Docker engine (its compat API), with the two images.

    Its root and socket are its own.  registries.conf lets it pull from the
    test registry over plain HTTP (dockerd allows 127.0.0.0/8 by default,
    podman does not).
    """
    import shutil
    import time

    if shutil.which("podman") is None:
        pytest.fail("podman is not installed (packaging/install-deps.sh installs it)",
                    pytrace=False)
    work = tmp_path_factory.mktemp("podman")
    sock = work / "podman.sock"
    (work / "registries.conf").write_text(
        f'[[registry]]\nlocation = "{registry.address}"\ninsecure = true\n')
    # As root podman gives a container RLIMIT_NOFILE 1048576 and RLIMIT_NPROC
    # 4194304 unless told, which this machine's hard limits refuse ("error
    # setting rlimit type 6"); an admin of such a host sets the same.
    (work / "containers.conf").write_text(
        '[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n')
    base = ["podman", "--root", str(work / "root"), "--runroot", str(work / "run")]
    env = dict(os.environ, CONTAINERS_REGISTRIES_CONF=str(work / "registries.conf"),
               CONTAINERS_CONF=str(work / "containers.conf"))
    log = open(work / "service.log", "w")
    p = subprocess.Popen(base + ["system", "service", "--time=0", f"unix://{sock}"], env=env,
                         stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    try:
        d = Docker(f"unix://{sock}")
        for _ in range(100):
            if sock.exists() and d("version", check=False).returncode == 0:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"podman system service did not answer: {(work / 'service.log').read_text()}",
                        pytrace=False)

        def importer(data, name):
            return subprocess.run(base + ["import", "-", name], env=env, timeout=300,
                                  capture_output=True, **({"stdin": data} if not
                                                          isinstance(data, bytes) else
                                                          {"input": data}))
        _import_images(d, importer)
        yield d
    finally:
        p.terminate()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()
        # Its storage stays mounted (overlay, shm) until podman lets it go; what
        # a reset that fails or hangs leaves is unmounted here all the same.
        try:
            subprocess.run(base + ["system", "reset", "--force"], env=env,
                           capture_output=True, timeout=60)
        except subprocess.TimeoutExpired:
            pass
        with open("/proc/self/mounts") as f:
            mounts = [line.split()[1] for line in f if line.split()[1].startswith(str(work))]
        for m in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True)


@pytest.fixture(scope="session")
def tls_engine(docker_host, tmp_path_factory):
    """A dockerd of its own on tcp://127.0.0.1 with --tlsverify and a throwaway CA.

    Yields (Docker, cert_dir): cert_dir holds ca.pem, cert.pem and key.pem of
    a client the daemon trusts, as tls_cert_path wants them.  Only the
    busybox image is imported (it serves as the helper image too).
    """
    import shutil
    import socket
    import time

    from gitlab_double import certs

    work = tmp_path_factory.mktemp("tlsdockerd")
    pki = certs.generate(work / "pki")
    cert_dir = work / "client"
    cert_dir.mkdir()
    shutil.copy(pki.ca_cert, cert_dir / "ca.pem")
    shutil.copy(pki.client_cert, cert_dir / "cert.pem")
    shutil.copy(pki.client_key, cert_dir / "key.pem")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    host = f"tcp://127.0.0.1:{port}"
    exec_root = f"/tmp/runner-dockerd-tls-{os.getpid()}"
    log = open(work / "dockerd.log", "w")
    p = subprocess.Popen(["dockerd", "--bridge=none", "--iptables=false", "--ip6tables=false",
                          "--data-root", str(work / "data"), "--exec-root", exec_root,
                          "--pidfile", str(work / "dockerd.pid"), "--tlsverify",
                          "--tlscacert", pki.ca_cert, "--tlscert", pki.server_cert,
                          "--tlskey", pki.server_key, "-H", host],
                         stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    d = Docker(host)
    d.env.update(DOCKER_TLS_VERIFY="1", DOCKER_CERT_PATH=str(cert_dir))
    try:
        for _ in range(600):
            if d("version", check=False).returncode == 0:
                break
            if p.poll() is not None:
                break
            time.sleep(0.1)
        else:
            p.kill()
        if p.poll() is not None:
            pytest.fail(f"dockerd with TLS did not start: {(work / 'dockerd.log').read_text()}",
                        pytrace=False)
        r = subprocess.run(["docker", "import", "-", BUSYBOX_IMAGE], input=busybox_tar(),
                           env=d.env, capture_output=True, timeout=120)
        if r.returncode != 0:
            pytest.fail(f"docker import over TLS: {r.stderr.decode()}", pytrace=False)
        yield d, str(cert_dir), str(work / "pki")
    finally:
        p.terminate()
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()
