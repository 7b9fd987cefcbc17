"""The container image (packaging/container) built and run for real.

A private dockerd (packaging/container/dockerd.sh: state under
build/docker/, no bridge, no iptables) builds the image offline from the
local Debian bases that `make rootfs` made (the one step that fetches, done
before pytest); containers use --network host and reach the GitLab double
on 127.0.0.1.  The session fixture builds the image once and stops dockerd
at the end if it started it.

Needs root (dockerd does), as `make test` on the CI machine is.
"""
import os
import re
import socket
import subprocess
import urllib.error
import urllib.request

import pytest
import yaml

from daemon_helpers import FAST_ENV, FINAL_STATES, add_job, new_token, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CTR = os.path.join(ROOT, "packaging", "container")
K8S = os.path.join(ROOT, "packaging", "kubernetes")
IMAGE = "runner:test"
UID = 999


@pytest.fixture(scope="session")
def image(docker_host):
    """The image, built the README's way (build-image.sh --offline), tagged runner:test."""
    p = subprocess.run([os.path.join(CTR, "build-image.sh"), "--offline", IMAGE],
                       env=dict(os.environ, DOCKER_HOST=docker_host), capture_output=True,
                       text=True, timeout=1800)
    if p.returncode != 0:
        pytest.fail(f"build-image.sh failed:\n{p.stdout[-4000:]}\n{p.stderr[-6000:]}",
                    pytrace=False)
    return IMAGE


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_get(url):
    """(status, body) of a GET; an error status too; (None, why) if nothing answers."""
    try:
        with _OPENER.open(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, OSError) as e:
        return None, str(e)


def config_dir(tmp_path):
    """A host directory for /etc/gitlab-runner, owned by the image's user as the volume is."""
    d = tmp_path / "config"
    d.mkdir()
    os.chown(d, UID, -1)
    d.chmod(0o700)
    return d


def register(docker, image, gitlab, cfg, name="ctr"):
    r = gitlab.add_runner(token=new_token())
    p = docker("run", "--rm", "--network", "host", "-v", f"{cfg}:/etc/gitlab-runner",
               image, "register", "--non-interactive", "--url", gitlab.url,
               "--token", r.token, "--executor", "shell", "--name", name, check=False)
    assert p.returncode == 0, p.stderr
    assert r.token not in p.stdout + p.stderr
    return r


def fast_env_args():
    out = []
    for k, v in FAST_ENV.items():
        out += ["-e", f"{k}={v}"]
    return out


def health(docker, name):
    return (docker.inspect(name)["State"].get("Health") or {}).get("Status")


# ---------------------------------------------------------------------------

def test_image_runs_as_non_root_stops_with_sigquit_and_has_a_health_check(docker, image):
    cfg = docker.inspect(image)["Config"]
    assert cfg["User"] == str(UID)
    assert cfg["StopSignal"] == "SIGQUIT"
    assert cfg["Healthcheck"]["Test"] == ["CMD", "/usr/local/bin/runner-healthcheck"]
    assert cfg["Entrypoint"] == ["/usr/bin/tini", "--", "/usr/bin/runner"]
    assert cfg["Cmd"][0] == "run" and "--listen-address" in cfg["Cmd"]
    assert "/etc/gitlab-runner" in cfg["Volumes"]
    assert "CONFIG_FILE=/etc/gitlab-runner/config.toml" in cfg["Env"]

    p = docker("run", "--rm", "--network", "host", "--entrypoint", "/bin/bash", image, "-c",
               "id -u; id -un; echo $HOME; stat -c '%U %a' /etc/gitlab-runner; "
               "git --version; test -e /etc/machine-id && echo machine-id; "
               "test -e ~/.bash_logout && echo bash_logout; "
               "runner --version")
    lines = p.stdout.splitlines()
    assert lines[0] == str(UID) and lines[0] != "0"
    assert lines[1:4] == ["gitlab-runner", "/home/gitlab-runner", "gitlab-runner 700"]
    assert lines[4].startswith("git version ")
    assert "machine-id" not in lines, "a machine-id baked into the image: one system ID for all"
    # Jobs run in login shells: Debian's .bash_logout would fail every stage.
    assert "bash_logout" not in lines
    with open(os.path.join(ROOT, "VERSION")) as f:
        assert f"Version:      {f.read().strip()}" in p.stdout


def test_registers_runs_a_job_turns_healthy_and_drains_on_docker_stop(docker, image, gitlab,
                                                                      tmp_path):
    cfg = config_dir(tmp_path)
    r = register(docker, image, gitlab, cfg)
    text = (cfg / "config.toml").read_text()
    assert f'token = "{r.token}"' in text and 'executor = "shell"' in text
    assert os.stat(cfg / "config.toml").st_uid == UID
    assert (cfg / ".runner_system_id").read_text().strip() in r.system_ids

    port = free_port()
    name = docker.name("run")
    docker("run", "-d", "--name", name, "--network", "host",
           "-v", f"{cfg}:/etc/gitlab-runner",
           "-e", f"RUNNER_HEALTH_ADDRESS=127.0.0.1:{port}", *fast_env_args(),
           "--health-interval", "1s", "--health-start-period", "0s",
           image, "--debug", "run", "--working-directory", "/home/gitlab-runner",
           "--listen-address", f"127.0.0.1:{port}")

    # The subshell's sleep outlives its stage: an orphan for PID 1 to reap.
    job = add_job(gitlab, r, script=["echo hello from the container", "git --version",
                                     "echo uid=$(id -u)", "(sleep 0.5 &)"])
    gitlab.wait_for_job(job, FINAL_STATES, timeout=60)
    log = job.log_text
    assert job.status == "success", log + "\nrunner:\n" + docker.logs(name)
    assert "hello from the container" in log
    assert re.search(r"\dO git version \d+\.", log), log     # after the timestamp
    assert f"uid={UID}" in log
    assert job.final["state"] == "success" and job.checksum_ok is True

    wait_until(lambda: health(docker, name) == "healthy", 60,
               f"the health check to pass; logs:\n{docker.logs(name)}")
    # tini, PID 1 of the image, reaped the orphan: no zombie is left.
    zombies = docker("exec", name, "sh", "-c",
                     "grep -l '^State:.*Z' /proc/[0-9]*/status || true").stdout
    assert zombies.strip() == "", zombies
    status, body = http_get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    assert re.search(r'^runner_jobs_finished_total\{state="success"\} 1$', body, re.M), body

    # docker stop sends the image's STOPSIGNAL (SIGQUIT) while a job runs:
    # the job finishes and is reported, then the runner exits 0.
    go = cfg / "go"
    slow = add_job(gitlab, r, script=["echo waiting",
                                      "while [ ! -e /etc/gitlab-runner/go ]; do sleep 0.1; done",
                                      "echo drained"])
    wait_until(lambda: "waiting" in slow.log_text, 60, "the second job to start")
    stop = docker.popen("stop", "-t", "120", name)
    try:
        wait_until(lambda: "SIGQUIT" in docker.logs(name), 30,
                   f"the runner to log the SIGQUIT; logs:\n{docker.logs(name)}")
        assert slow.final is None
        # Draining: still live (Kubernetes' liveness must not kill it), no longer ready.
        assert http_get(f"http://127.0.0.1:{port}/health/live")[0] == 200
        assert http_get(f"http://127.0.0.1:{port}/health/ready")[0] == 503
        go.touch()
        gitlab.wait_for_job(slow, "success", timeout=60)
        out, err = stop.communicate(timeout=120)
        assert stop.returncode == 0, err
    finally:
        if stop.poll() is None:
            stop.kill()
    assert "drained" in slow.log_text
    state = docker.inspect(name)["State"]
    assert state["Status"] == "exited"
    assert state["ExitCode"] == 0, docker.logs(name)
    assert r.token not in docker.logs(name)


# ---------------------------------------------------------------------------
# The Kubernetes Deployment's container, as the manifest says, in docker

def deployment_container():
    with open(os.path.join(K8S, "deployment.yaml")) as f:
        dep = next(d for d in yaml.safe_load_all(f) if d and d["kind"] == "Deployment")
    spec = dep["spec"]["template"]["spec"]
    return spec, spec["containers"][0]


def test_deployment_args_work_with_a_read_only_root_and_the_prestop_hook_drains(
        docker, image, gitlab, tmp_path):
    """The Deployment's args, mounts and hook: config read-only as a Secret is,
    root file system read-only, the emptyDirs as empty host directories."""
    spec, ctr = deployment_container()
    cfg = config_dir(tmp_path)
    r = register(docker, image, gitlab, cfg, name="k8s")

    port = free_port()
    args = list(ctr["args"])
    i = args.index("--listen-address")
    assert args[i + 1] == f"0.0.0.0:{ctr['ports'][0]['containerPort']}"
    args[i + 1] = f"127.0.0.1:{port}"      # host networking: a free port
    mounts = []
    for m in ctr["volumeMounts"]:
        vol = next(v for v in spec["volumes"] if v["name"] == m["name"])
        if "secret" in vol:
            mounts += ["-v", f"{cfg}:{m['mountPath']}:ro"]
        else:
            assert "emptyDir" in vol
            # What the kubelet makes of an emptyDir: an empty host directory, mode 0777.
            d = tmp_path / f"emptydir-{m['name']}"
            d.mkdir()
            d.chmod(0o777)
            mounts += ["-v", f"{d}:{m['mountPath']}"]
    sc = ctr["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    name = docker.name("k8s")
    docker("run", "-d", "--name", name, "--network", "host", "--read-only",
           "--user", str(spec["securityContext"]["runAsUser"]),
           "--group-add", str(spec["securityContext"]["fsGroup"]),
           "--security-opt", "no-new-privileges", "--cap-drop", "ALL",
           *mounts, *fast_env_args(), image, *args)

    for probe in ("livenessProbe", "readinessProbe"):
        path = ctr[probe]["httpGet"]["path"]
        wait_until(lambda: http_get(f"http://127.0.0.1:{port}{path}")[0] == 200, 30,
                   f"{probe} {path} to answer 200; logs:\n{docker.logs(name)}")

    job = add_job(gitlab, r, script=["echo in k8s; git init -q /tmp/repo && echo git ok",
                                     "while [ ! -e /etc/gitlab-runner/go ]; do sleep 0.1; done",
                                     "echo finished"])
    wait_until(lambda: "git ok" in job.log_text, 60,
               f"the job to run; logs:\n{docker.logs(name)}")
    hook = docker.popen("exec", name, *ctr["lifecycle"]["preStop"]["exec"]["command"])
    try:
        wait_until(lambda: "SIGQUIT" in docker.logs(name), 30,
                   f"the preStop hook's SIGQUIT; logs:\n{docker.logs(name)}")
        assert job.final is None
        (cfg / "go").touch()
        gitlab.wait_for_job(job, "success", timeout=60)
        hook.communicate(timeout=60)
    finally:
        if hook.poll() is None:
            hook.kill()
    wait_until(lambda: docker.inspect(name)["State"]["Status"] == "exited", 60,
               "the container to exit after the drain")
    assert docker.inspect(name)["State"]["ExitCode"] == 0, docker.logs(name)
    assert "finished" in job.log_text
    assert "Read-only file system" not in docker.logs(name)
