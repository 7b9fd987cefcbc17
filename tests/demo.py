#!/usr/bin/python3
"""`make demo`: the main job end to end, on the bundled GitLab double.

1. start the GitLab double on 127.0.0.1 (long polling on, as Workhorse does)
   with a runner created GitLab-side, and a real git repository (with a
   submodule) served by `git http-backend`, which only lets the job token in;
   the pipeline has four jobs: one that clones the repository, prints and
   uses a masked variable, and uploads artifacts and saves a cache; one that
   fails; one that is canceled while it runs; and, once the first is done,
   one that downloads the first one's artifacts and restores its cache;
   and a fifth for a second runner, in a container: a busybox image (made
   from Debian's busybox-static, imported into a private dockerd) with a
   service that serves a page the job fetches;
2. `runner register` binds both runners (shell, docker) in a fresh
   config.toml;
3. `runner run` asks for the jobs, runs them in bash or in their
   containers and reports them;
4. once every job is final the daemon is drained (SIGQUIT) and each job's
   log is printed as GitLab received it, with its final state.

Exits non-zero if any job ended otherwise than expected (in GitLab or in the
daemon's own "finished" line), if a final report does not describe the log
GitLab holds, or if the runner broke the protocol.  The work directory
(config.toml, the repositories, the builds, the journal) is removed at the
end unless KEEP=1 is in the environment (`make demo KEEP=1`); then the last
line says where it is.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

from git_server import GitServer, make_repos  # noqa: E402
from gitlab_double import GitLabDouble, job_payload  # noqa: E402
from images import BUSYBOX_IMAGE, busybox_tar  # noqa: E402

RUNNER = os.path.join(ROOT, "build", "runner")
TOKEN = "glrt-t1_DemoRunnerToken00000"
DOCKER_TOKEN = "glrt-t1_DemoDockerToken00000"
DOCKERD = os.path.join(ROOT, "packaging", "container", "dockerd.sh")
MANAGED = "label=com.gitlab.gitlab-runner.managed=true"
SECRET = "s3cr3t-demo-value-42"


def say(text):
    print(f"\033[1m==> {text}\033[0m", flush=True)


def wait(predicate, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise SystemExit(f"demo: timed out waiting for {what}")


def echo_and_keep(stream, lines):
    """The daemon's log on our stderr as it comes, each line also kept in lines."""
    for line in stream:
        sys.stderr.write(line)
        sys.stderr.flush()
        lines.append(line)


def start_engine():
    """The private dockerd of packaging/container (build/docker), with the demo's image.

    Returns (DOCKER_HOST, started): started says whether this demo started
    it, and so stops it.
    """
    host = subprocess.run([DOCKERD, "host"], capture_output=True, text=True,
                          check=True).stdout.strip()
    env = dict(os.environ, DOCKER_HOST=host)
    running = subprocess.run(["docker", "version"], env=env, capture_output=True).returncode == 0
    if not running:
        subprocess.run([DOCKERD, "start"], check=True)
    if subprocess.run(["docker", "image", "inspect", BUSYBOX_IMAGE], env=env,
                      capture_output=True).returncode != 0:
        subprocess.run(["docker", "import", "-", BUSYBOX_IMAGE], input=busybox_tar(), env=env,
                       check=True, capture_output=True)
    return host, not running


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    work = tempfile.mkdtemp(prefix="runner-demo.")
    try:
        return demo(work)
    finally:
        if os.environ.get("KEEP", "") not in ("", "0"):
            say(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def demo(work):
    cfg = os.path.join(work, "config.toml")
    gitlab = GitLabDouble(long_poll=5).start()
    runner_gitlab = gitlab.add_runner(token=TOKEN, id=7001)
    repos = make_repos(os.path.join(work, "repositories"))
    git = GitServer(repos.root, token="no job yet").start()
    say(f"GitLab double on {gitlab.url}; git on {git.url}; work directory {work}")
    docker_host, started_engine = start_engine()
    say(f"Docker engine on {docker_host}")

    say("runner register (shell, then docker)")
    subprocess.run([RUNNER, "register", "--non-interactive", "-c", cfg, "--url", gitlab.url,
                    "--token", TOKEN, "--executor", "shell", "--name", "demo-runner"],
                   check=True)
    docker_gitlab = gitlab.add_runner(token=DOCKER_TOKEN, id=7002)
    subprocess.run([RUNNER, "register", "--non-interactive", "-c", cfg, "--url", gitlab.url,
                    "--token", DOCKER_TOKEN, "--executor", "docker", "--name", "demo-docker",
                    "--docker-host", docker_host, "--docker-image", BUSYBOX_IMAGE,
                    "--docker-helper-image", BUSYBOX_IMAGE, "--docker-pull-policy",
                    "if-not-present", "--docker-network-mode", "host"], check=True)
    port = free_port()

    jobs = [
        gitlab.add_job(job_payload(
            name="hello", id=1, repo_url=git.clean_url(repos.project), sha=repos.main_head,
            depth=2, variables={"GREETING": "hello from the pipeline",
                                "API_KEY": {"value": SECRET, "masked": True},
                                "GIT_SUBMODULE_STRATEGY": "normal"},
            script=["echo \"$GREETING\"", "echo \"the key is $API_KEY\"",
                    "printf 'split: %s' \"${API_KEY%%-*}\"; printf '%s\\n' \"-${API_KEY#*-}\"",
                    "git log --oneline", "cat lib/lib.txt",
                    "mkdir -p dist && git log --oneline > dist/commits.txt",
                    "mkdir -p .deps && echo 'cached dependency' > .deps/dep.txt"],
            artifacts=[{"name": "dist", "paths": ["dist/"], "when": "on_success",
                        "artifact_type": "archive", "artifact_format": "zip",
                        "expire_in": "1 day"}],
            cache=[{"key": "deps-$CI_COMMIT_REF_SLUG", "paths": [".deps/"],
                    "policy": "pull-push", "when": "on_success"}]),
            runner=runner_gitlab, id=9001),
        gitlab.add_job(job_payload(
            name="fails", id=2, variables={"GIT_STRATEGY": "none"}, script=["echo about to fail", "exit 3"],
            after_script=["echo \"after_script sees CI_JOB_STATUS=$CI_JOB_STATUS\""]),
            runner=runner_gitlab, id=9002),
        gitlab.add_job(job_payload(
            name="canceled", id=3, variables={"GIT_STRATEGY": "none"}, script=["echo waiting to be canceled", "sleep 60"],
            after_script=["echo \"after_script sees CI_JOB_STATUS=$CI_JOB_STATUS\""]),
            runner=runner_gitlab, id=9003),
        gitlab.add_job(job_payload(
            name="in-a-container", id=5, image={"name": BUSYBOX_IMAGE},
            services=[{"name": BUSYBOX_IMAGE, "alias": "web",
                       "entrypoint": ["/bin/sh", "-c"],
                       "command": ["mkdir -p /www && echo 'served by the demo service' > "
                                   f"/www/index.html && exec httpd -f -p 127.0.0.1:{port} -h /www"]}],
            variables={"GIT_STRATEGY": "none", "HEALTHCHECK_TCP_PORT": str(port)},
            script=["echo \"$CI_JOB_NAME runs in $(hostname)\"",
                    "ls /bin/bash 2>/dev/null || echo 'no bash in this image: sh it is'",
                    f"wget -qO- http://127.0.0.1:{port}/"]),
            runner=docker_gitlab, id=9005),
    ]
    git.token = jobs[0].token

    say("runner run")
    env = dict(os.environ, RUNNER_TRACE_INTERVAL_MS="500", RUNNER_KEEPALIVE_MS="2000")
    daemon = subprocess.Popen([RUNNER, "run", "-c", cfg, "-d", work], env=env,
                              stderr=subprocess.PIPE, text=True, errors="replace")
    daemon_lines = []
    reader = threading.Thread(target=echo_and_keep, args=(daemon.stderr, daemon_lines))
    reader.start()
    try:
        wait(lambda: "waiting to be canceled" in jobs[2].log_text, 60, "the third job to start")
        say("canceling the third job in GitLab")
        jobs[2].cancel()
        wait(lambda: gitlab.jobs_final([jobs[0].id]), 60, "the first job to finish")
        say("adding a job that uses the first one's artifacts and cache")
        jobs.append(gitlab.add_job(job_payload(
            name="uses-artifacts", id=4, variables={"GIT_STRATEGY": "none"},
            dependencies=[gitlab.artifact_dependency(jobs[0])],
            cache=[{"key": "deps-$CI_COMMIT_REF_SLUG", "paths": [".deps/"], "policy": "pull"}],
            script=["cat dist/commits.txt", "cat .deps/dep.txt"]),
            runner=runner_gitlab, id=9004))
        wait(lambda: gitlab.jobs_final([j.id for j in jobs]), 60, "every job to finish")
    finally:
        daemon.send_signal(signal.SIGQUIT)
        try:
            rc = daemon.wait(30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            rc = daemon.wait()
        reader.join()
        gitlab.stop()
        git.stop()
        left = subprocess.run(["docker", "ps", "-a", "--filter", MANAGED, "--format",
                               "{{.Names}}"], env=dict(os.environ, DOCKER_HOST=docker_host),
                              capture_output=True, text=True).stdout.split()
        if started_engine:
            subprocess.run([DOCKERD, "stop"], check=False)

    problems = []
    expected = {9001: ("success", None), 9002: ("failed", "script_failure"),
                9003: ("canceled", None), 9004: ("success", None), 9005: ("success", None)}
    for job in jobs:
        r = job.report()
        say(f"job {r['id']} ({r['name']}): {r['status']}"
            + (f", {r['failure_reason']}" if r.get("failure_reason") else "")
            + (f", exit code {r['exit_code']}" if r.get("exit_code") else "")
            + f", {r['bytesize']} bytes, checksum {'ok' if r['checksum_ok'] else 'WRONG'}")
        sys.stdout.write(r["log"])
        want_status, want_reason = expected[job.id]
        if r["status"] != want_status or (want_reason and r["failure_reason"] != want_reason):
            problems.append(f"job {job.id} ended {r['status']}/{r['failure_reason']}")
        said = {"success": "succeeded"}.get(want_status, want_status)
        line = f"job {job.id}: finished, {said}; GitLab has the report"
        if not any(line in d for d in daemon_lines):
            problems.append(f"the daemon did not say \"{line}\"")
        if not r["checksum_ok"]:
            problems.append(f"job {job.id}: {r['checksum_mismatch']}")
        if SECRET in r["log"]:
            problems.append(f"job {job.id}: the masked value reached GitLab")
        if job.token in r["log"]:
            problems.append(f"job {job.id}: the job token reached the log")
    if repos.main_head[:7] not in jobs[0].log_text or "lib 2" not in jobs[0].log_text:
        problems.append("job 9001 did not check out the pipeline's commit with its submodule")
    by_id = {j.id: j for j in jobs}
    if (repos.main_head[:7] not in by_id[9004].log_text
            or "cached dependency" not in by_id[9004].log_text):
        problems.append("job 9004 did not get job 9001's artifacts and cache")
    if "served by the demo service" not in by_id[9005].log_text:
        problems.append("job 9005 did not reach its service")
    if left:
        problems.append(f"containers left on the engine: {left}")
    problems += [f"protocol violation: {v}" for v in gitlab.violations]
    problems += [f"git server: {e}" for e in git.errors]
    if rc != 0:
        problems.append(f"runner run exited {rc} after SIGQUIT")
    if problems:
        say("demo FAILED")
        for p in problems:
            print("  " + p)
        return 1
    say("demo done: every job ended as expected, and GitLab holds exactly what was reported")
    return 0


if __name__ == "__main__":
    sys.exit(main())
