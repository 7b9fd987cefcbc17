"""startup: exec of `runner run` to its first POST /jobs/request; binary size.

Both the runner and the limit (/bin/true) are spawned by this Python with
subprocess.Popen, so the fork+exec cost of a big parent is in both: the
difference is what the runner itself spends before asking for a job.
It runs over plain HTTP and over HTTPS through a throwaway CA
(tls-ca-file): the first HTTPS request also pays the handshake and the
loading of the CA store.
"""
import os
import shutil
import subprocess
import time

from common import OUT, RUNNER, daemon_env, figure, stop_daemon, wait_for

ID = "startup"
TITLE = "exec to first job request; binary size"
RUNS = 10


def _spawn_true():
    t0 = time.monotonic()
    subprocess.Popen(["/bin/true"]).wait()
    return time.monotonic() - t0


def _first_request(gitlab, cfg, work):
    before = len(gitlab.requests_for("POST", r"/jobs/request$"))
    env = daemon_env(work)
    t0 = time.monotonic()
    p = subprocess.Popen([RUNNER, "run", "-c", cfg, "-d", work], env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        reqs = wait_for(lambda: gitlab.requests_for("POST", r"/jobs/request$")[before:],
                        10, "the first job request")
        return reqs[0].time - t0     # the double stamps requests with time.monotonic()
    finally:
        stop_daemon(p, 10)


def _exec_to_request(work, files=None):
    """RUNS times exec -> first job request, ms; over HTTPS when files (certs) are given."""
    from daemon_helpers import config_text, entry, new_token
    from gitlab_double import GitLabDouble

    gitlab = GitLabDouble(tls=files).start()
    work = os.path.join(work, "https" if files else "http")
    os.makedirs(work)
    try:
        r = gitlab.add_runner(token=new_token())
        cfg = os.path.join(work, "config.toml")
        tls = {"tls-ca-file": files.ca_cert} if files else {}
        with open(cfg, "w") as f:
            f.write(config_text([entry(gitlab, r, "bench", **tls)]))
        _first_request(gitlab, cfg, work)           # warm the page cache
        return [_first_request(gitlab, cfg, work) * 1e3 for _ in range(RUNS)]
    finally:
        gitlab.stop()


def run(work):
    from gitlab_double import certs

    ours = _exec_to_request(work)
    ours_tls = _exec_to_request(work, certs.generate(os.path.join(work, "tls")))
    spawn = [_spawn_true() * 1e3 for _ in range(RUNS)]

    os.makedirs(OUT, exist_ok=True)
    stripped = os.path.join(OUT, "runner.stripped")
    if shutil.which("strip"):
        subprocess.run(["strip", "-o", stripped, RUNNER], check=True)
    else:
        stripped = None
    rows = [figure("exec to first POST /jobs/request", ours, "ms", anchor="—", goal="≤ 50 ms",
                   limit=spawn, limit_what="Popen(/bin/true) until exit"),
            figure("exec to first POST /jobs/request, over HTTPS", ours_tls, "ms",
                   goal="≤ 50 ms", limit=spawn, limit_what="Popen(/bin/true) until exit",
                   note="tls-ca-file through a throwaway CA: the first request also "
                        "builds libcurl's CA store (the system bundle and that CA)")]
    rows.append(figure("binary size (build/runner, -O2 -g)", os.path.getsize(RUNNER) / 2**20,
                       "MiB", anchor="56 MB"))
    if stripped:
        rows.append(figure("binary size, stripped", os.path.getsize(stripped) / 2**20, "MiB",
                           anchor="56 MB", goal="≤ 1 MiB"))
    return rows
