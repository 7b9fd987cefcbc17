"""The docker executor on real engines: jobs in their image, as gitlab-runner runs them.

Every test runs on a private dockerd and on Debian's podman
(docker_fixtures), with images imported from this machine, the GitLab
double and `runner run` with executor = "docker".  After each test nothing
of the runner is left on the engine but its helper bundle volume and cache
volumes, which are kept by design.
"""
import os
import re
import signal
import time

import pytest

from daemon_helpers import FINAL_STATES, daemons, wait_until, without_sources  # noqa: F401
from docker_fixtures import docker_entry, leftovers
from git_server import git_repos, git_server  # noqa: F401 (fixtures)
from images import BUSYBOX_IMAGE, RUNTIME_IMAGE
from gitlab_double import job_payload


@pytest.fixture(params=["dockerd", "podman"])
def engine(request):
    d = request.getfixturevalue("docker_images" if request.param == "dockerd" else
                                "podman_engine")
    assert leftovers(d) == {}, "the engine has leftovers from before this test"
    yield d
    left = leftovers(d)
    for c in left.get("containers", ()):
        d("rm", "-f", "-v", c, check=False)
    for n in left.get("networks", ()):
        d("network", "rm", n, check=False)
    for v in left.get("volumes", ()):
        d("volume", "rm", "-f", v, check=False)
    assert left == {}, f"left on the engine: {left}"


def run_docker_job(gitlab, daemons, engine, wait_s=120, entry_keys=None, **payload):
    r = gitlab.add_runner()
    d = daemons(gitlab, [docker_entry(gitlab, r, "dock", engine.env["DOCKER_HOST"],
                                      **(entry_keys or {}))],
               concurrent=1, check_interval=1, asan=True)
    payload.setdefault("variables", without_sources())
    job = gitlab.add_job(job_payload(**payload), runner=r)
    d.start()
    try:
        gitlab.wait_for_job(job, statuses=FINAL_STATES, timeout=wait_s)
    finally:
        d.stop()
    d.assert_sanitizers_clean()
    return job, d


def test_job_runs_in_its_image(gitlab, daemons, engine):
    job, d = run_docker_job(gitlab, daemons, engine,
                            image={"name": RUNTIME_IMAGE},
                            script=["cat /etc/debian_version", "id -u",
                                    'echo "dir=$PWD project=$CI_PROJECT_DIR"'])
    log = job.log_text
    assert job.status == "success", log
    assert 'Preparing the "docker" executor' in log
    assert f"Using Docker executor with image {RUNTIME_IMAGE}" in log
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "build", "rootfs", "runtime",
                           "etc", "debian_version")) as f:
        assert f.read().strip() in log
    assert "dir=/builds/group/project project=/builds/group/project" in log
    assert job.checksum_ok
    d.assert_no_tokens()


def test_a_busybox_image_runs_its_sh(gitlab, daemons, engine):
    # No bash in the image: the shell is detected in the container, as gitlab-runner does.
    job, _ = run_docker_job(gitlab, daemons, engine, image={"name": BUSYBOX_IMAGE},
                            script=["ls /bin/bash || echo no bash here", "busybox > help.txt || true",
                                    "head -1 help.txt"])
    assert job.status == "success", job.log_text
    assert "no bash here" in job.log_text and "BusyBox v" in job.log_text


def test_failing_script_fails_the_job_with_its_exit_code(gitlab, daemons, engine):
    job, _ = run_docker_job(gitlab, daemons, engine, image={"name": RUNTIME_IMAGE},
                            script=["echo before", "exit 3", "echo never"])
    assert job.status == "failed"
    assert job.failure_reason == "script_failure"
    assert "before" in job.log_text and "never" not in job.log_text.replace("echo never", "")
    assert "exit code 3" in job.log_text


def test_missing_image_with_pull_policy_never_names_the_image(gitlab, daemons, engine):
    job, _ = run_docker_job(gitlab, daemons, engine, image={"name": "runner-test/absent:9"},
                            entry_keys={"pull_policy": "never"}, script=["true"])
    assert job.status == "failed"
    assert "runner-test/absent:9" in job.log_text, job.log_text


def test_killed_daemon_leaves_nothing_after_restart(gitlab, daemons, engine):
    r = gitlab.add_runner()
    d = daemons(gitlab, [docker_entry(gitlab, r, "dock", engine.env["DOCKER_HOST"])],
               concurrent=1, check_interval=1)
    job = gitlab.add_job(job_payload(image={"name": RUNTIME_IMAGE},
                                     script=["echo started", "sleep 300"],
                                     variables=without_sources()), runner=r)
    d.start()
    wait_until(lambda: "started" in job.log_text, 120, "the job's script running")
    assert leftovers(engine).get("containers"), "the job's containers exist while it runs"
    d.kill9()
    time.sleep(0.5)
    assert leftovers(engine).get("containers"), "kill -9 stops nothing on the engine"
    d.start()
    wait_until(lambda: leftovers(engine) == {}, 60, "the restarted daemon sweeping the job's objects")
    d.stop(signal.SIGQUIT)


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_service_answers_the_job(gitlab, daemons, engine):
    # Host networking (the engine has no bridge): the service listens on loopback.
    port = free_port()
    job, _ = run_docker_job(
        gitlab, daemons, engine, image={"name": RUNTIME_IMAGE},
        services=[{"name": BUSYBOX_IMAGE, "alias": "web",
                   "entrypoint": ["/bin/sh", "-c"],
                   "command": [f"mkdir -p /www && echo served by the service > /www/index.html"
                               f" && exec httpd -f -p 127.0.0.1:{port} -h /www"]}],
        variables=without_sources({"HEALTHCHECK_TCP_PORT": str(port)}),
        script=[f"for i in 1 2 3 4 5; do exec 3<>/dev/tcp/127.0.0.1/{port} && break; "
                "sleep 1; done",
                f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3"])
    assert job.status == "success", job.log_text
    assert "served by the service" in job.log_text


SERVICE_LINE = re.compile(r"\x1b\[0;37m\[service:([^\]]*)\] "
                          r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[.0-9]*Z (.*?)\x1b\[0;m")


@pytest.mark.parametrize("debug", [True, False])
def test_ci_debug_services_puts_service_output_in_the_log(gitlab, daemons, engine, debug):
    variables = {"CI_DEBUG_SERVICES": "true"} if debug else {}
    job, _ = run_docker_job(
        gitlab, daemons, engine, image={"name": BUSYBOX_IMAGE},
        services=[{"name": BUSYBOX_IMAGE, "alias": "web", "entrypoint": ["/bin/sh", "-c"],
                   "command": ["echo hello from the service; echo to stderr >&2; "
                               "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.2; done"]}],
        variables=without_sources(variables), script=["sleep 2", "echo job done"])
    log = job.log_text
    assert job.status == "success", log
    lines = SERVICE_LINE.findall(log)
    if not debug:
        assert lines == [] and "hello from the service" not in log, log
        return
    assert ("hello from the service" in [text for _, text in lines] and
            "to stderr" in [text for _, text in lines]), log
    assert all("web" in name.split("-") for name, _ in lines), lines
    # Followed while the job ran, not read once at the end.
    ticks = [int(text.split()[1]) for _, text in lines if text.startswith("tick ")]
    assert len(ticks) >= 3 and ticks == sorted(ticks), lines
    assert log.index("tick 1") < log.index("job done"), log


def test_artifacts_and_after_script_in_containers(gitlab, daemons, engine):
    job, _ = run_docker_job(
        gitlab, daemons, engine, image={"name": RUNTIME_IMAGE},
        variables=without_sources({"GREETING": "hello from a variable"}),
        script=['mkdir -p out && echo "$GREETING" > out/greeting.txt'],
        after_script=['echo "after: $(cat out/greeting.txt)"'],
        artifacts=[{"name": "out", "paths": ["out/"], "when": "on_success",
                    "artifact_type": "archive", "artifact_format": "zip"}])
    log = job.log_text
    assert job.status == "success", log
    assert "after: hello from a variable" in log
    assert 'Uploading artifacts as "archive" to coordinator... 201 Created' in log
    art = gitlab.artifact(job)
    import io
    import zipfile

    z = zipfile.ZipFile(io.BytesIO(art.data))
    assert z.read("out/greeting.txt") == b"hello from a variable\n"


def test_timeout_stops_the_container(gitlab, daemons, engine):
    t0 = time.monotonic()
    job, _ = run_docker_job(gitlab, daemons, engine, image={"name": RUNTIME_IMAGE},
                            timeout=3, script=["echo sleeping", "sleep 120"])
    assert job.status == "failed" and job.failure_reason == "job_execution_timeout", job.report()
    assert time.monotonic() - t0 < 60


# -- pulls from a registry with credentials ----------------------------------

@pytest.fixture
def pulled(registry, engine):
    """The registry's image is not on the engine before the test, nor after it."""
    engine("rmi", registry.image, check=False)
    yield registry
    engine("rmi", registry.image, check=False)


def test_pull_with_docker_auth_config(gitlab, daemons, engine, pulled):
    conf = pulled.auth_config("ci-user")
    job, d = run_docker_job(gitlab, daemons, engine, image={"name": pulled.image},
                            variables=without_sources({"DOCKER_AUTH_CONFIG": conf}),
                            script=["busybox true && echo pulled and ran"])
    log = job.log_text
    assert job.status == "success", log
    assert "Authenticating with credentials from $DOCKER_AUTH_CONFIG" in log
    assert f"Pulling docker image {pulled.image}" in log
    assert "pulled and ran" in log
    d.secrets.add(pulled.users["ci-user"])
    d.assert_no_tokens()


def test_pull_with_the_payload_registry_credentials(gitlab, daemons, engine, pulled):
    # GitLab's own registry: gitlab-ci-token and the job token, from the payload.
    token = pulled.users["gitlab-ci-token"]
    r = gitlab.add_runner()
    d = daemons(gitlab, [docker_entry(gitlab, r, "dock", engine.env["DOCKER_HOST"])],
                concurrent=1, check_interval=1)
    job = gitlab.add_job(job_payload(image={"name": pulled.image}, script=["echo ok"],
                                     variables=without_sources(),
                                     credentials=[{"type": "registry", "url": pulled.address,
                                                   "username": "gitlab-ci-token",
                                                   "password": "replaced by the job token"}]),
                         runner=r, token=token)
    d.start()
    gitlab.wait_for_job(job, statuses=FINAL_STATES, timeout=120)
    d.stop()
    assert job.status == "success", job.log_text
    assert "Authenticating with credentials from job payload (GitLab Registry)" in job.log_text
    d.assert_no_tokens()


@pytest.mark.parametrize("auth", ["wrong password", "none"])
def test_refused_pull_names_image_registry_and_cause(gitlab, daemons, engine, pulled, auth):
    variables = {}
    if auth != "none":
        variables["DOCKER_AUTH_CONFIG"] = pulled.auth_config("ci-user", "not-the-password")
    job, _ = run_docker_job(gitlab, daemons, engine, image={"name": pulled.image},
                            variables=without_sources(variables), script=["true"])
    log = job.log_text
    assert job.status == "failed"
    assert job.failure_reason in ("image_pull_failure", "runner_system_failure"), job.report()
    assert pulled.image in log and pulled.address in log, log
    # The engine's words for it, as it says them.
    assert re.search(r"unauthorized|authentication required|no basic auth credentials", log,
                     re.I), log
    assert re.search(r"ERROR: Job failed: failed to pull image", log), log


# -- tcp:// with TLS ------------------------------------------------------------

def test_engine_over_tcp_with_tls(gitlab, daemons, tls_engine):
    d, cert_dir, _ = tls_engine
    host = d.env["DOCKER_HOST"]
    r = gitlab.add_runner()
    dm = daemons(gitlab, [docker_entry(gitlab, r, "tls", host, image=BUSYBOX_IMAGE,
                                       helper_image=BUSYBOX_IMAGE, tls_verify=True,
                                       tls_cert_path=cert_dir)],
                 concurrent=1, check_interval=1, asan=True)
    job = gitlab.add_job(job_payload(script=["echo over tls"], variables=without_sources()),
                         runner=r)
    dm.start()
    gitlab.wait_for_job(job, statuses=FINAL_STATES, timeout=120)
    dm.stop()
    dm.assert_sanitizers_clean()
    assert job.status == "success", job.log_text
    assert "over tls" in job.log_text
    assert leftovers(d) == {}


def test_engine_over_tls_with_the_wrong_ca_fails_clearly(gitlab, daemons, tls_engine, tmp_path):
    import shutil

    from gitlab_double import certs

    d, cert_dir, _ = tls_engine
    other = certs.generate(tmp_path / "other")
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    shutil.copy(other.ca_cert, wrong / "ca.pem")
    shutil.copy(os.path.join(cert_dir, "cert.pem"), wrong / "cert.pem")
    shutil.copy(os.path.join(cert_dir, "key.pem"), wrong / "key.pem")
    host = d.env["DOCKER_HOST"]
    r = gitlab.add_runner()
    dm = daemons(gitlab, [docker_entry(gitlab, r, "tls", host, image=BUSYBOX_IMAGE,
                                       helper_image=BUSYBOX_IMAGE, tls_verify=True,
                                       tls_cert_path=str(wrong))],
                 concurrent=1, check_interval=1)
    job = gitlab.add_job(job_payload(script=["true"], variables=without_sources()), runner=r)
    dm.start()
    gitlab.wait_for_job(job, statuses=FINAL_STATES, timeout=120)
    dm.stop()
    assert job.status == "failed"
    assert job.failure_reason == "runner_system_failure", job.report()
    assert host.replace("tcp://", "") in job.log_text, job.log_text
    assert re.search(r"certificate|SSL|TLS", job.log_text), job.log_text
    assert job.log_text.count("the Docker engine at") == 1, job.log_text


def test_cancel_stops_the_stage_and_after_script_runs(gitlab, daemons, engine):
    r = gitlab.add_runner()
    d = daemons(gitlab, [docker_entry(gitlab, r, "dock", engine.env["DOCKER_HOST"])],
                concurrent=1, check_interval=1, asan=True,
                env={"RUNNER_KEEPALIVE_MS": "500"})
    job = gitlab.add_job(job_payload(image={"name": RUNTIME_IMAGE},
                                     script=["echo started", "sleep 300"],
                                     after_script=['echo "after_script: $CI_JOB_STATUS"'],
                                     variables=without_sources()), runner=r)
    d.start()
    wait_until(lambda: "started" in job.log_text, 120, "the job's script running")
    t0 = time.monotonic()
    job.cancel()
    gitlab.wait_for_job(job, statuses=("canceled", "failed", "success"), timeout=60)
    took = time.monotonic() - t0
    d.stop()
    d.assert_sanitizers_clean()
    assert job.status == "canceled", job.report()
    assert "after_script: canceled" in job.log_text, job.log_text
    assert took < 30, f"the cancel took {took:.1f} s"


def test_clone_in_the_helper_container(gitlab, daemons, engine, git_server):
    # git runs in the helper (the Debian base has it), the steps in the image.
    repos = git_server.repos
    r = gitlab.add_runner()
    d = daemons(gitlab, [docker_entry(gitlab, r, "dock", engine.env["DOCKER_HOST"])],
                concurrent=1, check_interval=1, asan=True)
    job = gitlab.add_job(job_payload(
        image={"name": RUNTIME_IMAGE}, sha=repos.main_head,
        repo_url=git_server.clean_url(repos.project), depth=2,
        variables={"GIT_SUBMODULE_STRATEGY": "normal"},
        script=["echo HEAD=$(git rev-parse HEAD)", "cat lib/lib.txt",
                "echo CONFIG; cat .git/config", "echo DIR=$PWD"]), runner=r)
    git_server.token = job.token
    d.start()
    gitlab.wait_for_job(job, statuses=FINAL_STATES, timeout=120)
    d.stop()
    d.assert_sanitizers_clean()
    log = job.log_text
    assert job.status == "success", log
    assert f"HEAD={repos.main_head}" in log
    assert "lib 2" in log                           # the submodule, at its recorded commit
    assert "DIR=/builds/group/project" in log
    # The checkout's config names the clean URL; the token is nowhere in the log.
    assert f"url = {git_server.clean_url(repos.project)}" in log
    assert job.token not in log
    d.assert_no_tokens()


def test_image_entrypoint_and_user_from_the_job(gitlab, daemons, engine):
    # image: entrypoint [""] runs no entrypoint; executor_opts.docker.user runs the steps
    # as that user (the helper's stages stay root, as gitlab-runner has them).
    job, _ = run_docker_job(gitlab, daemons, engine,
                            image={"name": RUNTIME_IMAGE, "entrypoint": [""],
                                   "executor_opts": {"docker": {"user": "nobody"}}},
                            script=["echo UID=$(id -u)", "touch mine && ls -n mine"])
    log = job.log_text
    assert job.status == "success", log
    assert "UID=65534" in log


def test_a_leftover_the_sweep_cannot_remove_is_said_and_tried_again(gitlab, daemons, engine):
    r = gitlab.add_runner()
    d = daemons(gitlab, [docker_entry(gitlab, r, "dock", engine.env["DOCKER_HOST"])],
               concurrent=1, check_interval=1)
    d.start()
    id_file = os.path.join(d.dir, ".runner_system_id")
    wait_until(lambda: os.path.exists(id_file), 30, "the daemon's system ID")
    d.stop(signal.SIGQUIT)
    with open(id_file) as f:
        system_id = f.read().split()[0]
    # A leftover of this runner that a container of somebody else's still uses.
    volume = "runner-test-leftover-in-use"
    engine("volume", "create", "--label", "com.gitlab.gitlab-runner.managed=true",
           "--label", f"io.runner.system_id={system_id}", volume)
    foreign = engine("create", "-v", f"{volume}:/data", BUSYBOX_IMAGE, "true").stdout.strip()
    time.sleep(1.1)     # the sweep spares what is not older than its start, to the second
    try:
        d.start()
        d.wait_log(r"sweep of .*: cannot remove a leftover: .*; tried again at the next sweep",
                   60)
        assert volume in engine("volume", "ls", "-q").stdout.split()
        d.stop(signal.SIGQUIT)
    finally:
        engine("rm", "-f", foreign, check=False)
    d.start()
    wait_until(lambda: volume not in engine("volume", "ls", "-q").stdout.split(), 60,
               "the next start sweeping the leftover once it is free")
    d.wait_log(r"sweep: removed 1 object that earlier jobs left", 30)
    d.stop(signal.SIGQUIT)
