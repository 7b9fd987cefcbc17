"""docker: the docker executor against the engine's own floor, its memory, its leaks.

On the private dockerd of packaging/container/dockerd.sh (build/docker),
with runner-test/busybox:1 (Debian's busybox-static) as the job's image and
the helper's, host networking, GIT_STRATEGY=none, a job of one `true`:

- added time per job: a job's time from GitLab's 201 to its final report
  accepted, serially, against the floor: the same engine calls for the same
  stages done by a minimal client in this process (a builds volume, a build
  and a helper container, then per stage attach, start, the script on
  stdin, the frames read to the end, wait; then removal), the calls any
  docker executor must make.  Limit: 1.2 x the floor, measured in the same
  run;
- daemon memory per concurrent docker job: RssAnon with 50 jobs running
  (each sleeping in its build container) over RssAnon idle, per job;
- N short jobs with concurrent = 8 (N = 1,000, BENCH_DOCKER_JOBS changes it):
  objects of this runner left on the engine afterwards, and RssAnon after
  the first tenth against after all.
"""
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time

from common import ROOT, figure, start_daemon, stop_daemon, wait_for

ID = "docker"
TITLE = "docker executor: time over the engine's floor, memory per job, 1,000 jobs"
DOCKERD = os.path.join(ROOT, "packaging", "container", "dockerd.sh")
SERIAL = 10
CONCURRENT_JOBS = 50
# What a GIT_STRATEGY=none job of one script line runs, and where (the job's log says so).
CACHE_VOLUME = re.compile(r"-cache-[0-9a-f]{32}(-protected)?$")
STAGES = (("helper", "prepare_script"), ("helper", "get_sources"), ("build", "step_script"),
          ("helper", "cleanup_file_variables"))


class Engine:
    """A minimal Engine API client over the unix socket: one connection per call."""

    def __init__(self, sock):
        self.sock = sock

    def _send(self, method, path, body=None, extra=""):
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.sock)
        data = json.dumps(body).encode() if body is not None else b""
        head = (f"{method} /v1.41{path} HTTP/1.1\r\nHost: docker\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n{extra}\r\n")
        s.sendall(head.encode() + data)
        return s

    @staticmethod
    def _read_head(s):
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        return int(head.split()[1]), head, rest

    def call(self, method, path, body=None):
        s = self._send(method, path, body, "Connection: close\r\n")
        status, head, rest = self._read_head(s)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        s.close()
        if status >= 300:
            raise RuntimeError(f"{method} {path}: {status} {rest[:200]!r}")
        if b"chunked" in head.lower():
            out, i = b"", 0
            while True:
                j = rest.index(b"\r\n", i)
                n = int(rest[i:j], 16)
                if n == 0:
                    break
                out += rest[j + 2:j + 2 + n]
                i = j + 4 + n
            rest = out
        return json.loads(rest) if rest.strip() else None

    def stage(self, cid, script):
        """attach, start, the script on stdin and half-close, the frames to the end, wait."""
        a = self._send("POST", f"/containers/{cid}/attach?stream=1&stdin=1&stdout=1&stderr=1",
                       extra="Connection: Upgrade\r\nUpgrade: tcp\r\n")
        self._read_head(a)
        self.call("POST", f"/containers/{cid}/start")
        a.sendall(script.encode())
        a.shutdown(socket.SHUT_WR)
        while a.recv(65536):
            pass
        a.close()
        return self.call("POST", f"/containers/{cid}/wait")["StatusCode"]


def floor_job(engine, image, n):
    """One job's engine calls by the minimal client; its seconds."""
    t0 = time.monotonic()
    vol = f"bench-floor-{os.getpid()}-{n}"
    engine.call("POST", "/volumes/create", {"Name": vol})
    ids = {}
    for kind in ("build", "helper"):
        ids[kind] = engine.call("POST", f"/containers/create?name={vol}-{kind}", {
            "Image": image, "Cmd": ["sh"], "OpenStdin": True, "StdinOnce": True,
            "AttachStdin": True, "AttachStdout": True, "AttachStderr": True,
            "HostConfig": {"NetworkMode": "host", "Binds": [f"{vol}:/builds"]}})["Id"]
    for kind, name in STAGES:
        engine.stage(ids[kind], f"echo {name}\ntrue\n")
    for cid in ids.values():
        engine.call("DELETE", f"/containers/{cid}?force=1&v=1")
    engine.call("DELETE", f"/volumes/{vol}")
    return time.monotonic() - t0


def _engine():
    host = subprocess.run([DOCKERD, "host"], capture_output=True, text=True,
                          check=True).stdout.strip()
    subprocess.run([DOCKERD, "start"], check=True, capture_output=True)
    env = dict(os.environ, DOCKER_HOST=host)
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    from images import BUSYBOX_IMAGE, busybox_tar
    if subprocess.run(["docker", "image", "inspect", BUSYBOX_IMAGE], env=env,
                      capture_output=True).returncode != 0:
        subprocess.run(["docker", "import", "-", BUSYBOX_IMAGE], input=busybox_tar(), env=env,
                       check=True, capture_output=True)
    return host, env, BUSYBOX_IMAGE


def _leftovers(env):
    flt = "label=com.gitlab.gitlab-runner.managed=true"
    out = subprocess.run(["docker", "ps", "-a", "-q", "--filter", flt], env=env,
                         capture_output=True, text=True).stdout.split()
    out += subprocess.run(["docker", "network", "ls", "-q", "--filter", flt], env=env,
                          capture_output=True, text=True).stdout.split()
    # The helper bundle and cache volumes are kept by design.
    out += [v for v in subprocess.run(["docker", "volume", "ls", "-q", "--filter", flt], env=env,
                                      capture_output=True, text=True).stdout.split()
            if not v.startswith("runner-helper-") and not CACHE_VOLUME.search(v)]
    return out


def _daemon(work, gitlab, runner, host, image, concurrent):
    from daemon_helpers import config_text, entry

    e = entry(gitlab, runner, "bench-docker", executor="docker")
    e.pop("shell")
    e["docker"] = {"host": host, "image": image, "helper_image": image,
                   "pull_policy": "if-not-present", "network_mode": "host"}
    cfg = os.path.join(work, "config.toml")
    with open(cfg, "w") as f:
        f.write(config_text([e], concurrent=concurrent, check_interval=1))
    return start_daemon(cfg, work)


def _rss_anon(pid):
    from common import proc_status
    return proc_status(pid, "RssAnon").get("RssAnon", 0)


def run(work):
    from daemon_helpers import new_token, without_sources
    from gitlab_double import GitLabDouble, job_payload

    host, env, image = _engine()
    engine = Engine(host[len("unix://"):])
    n_short = int(os.environ.get("BENCH_DOCKER_JOBS", "1000"))
    gitlab = GitLabDouble().start()
    rows = []
    p = None
    try:
        r = gitlab.add_runner(token=new_token())

        # 1. serial jobs against the floor.
        floors = [floor_job(engine, image, i) for i in range(SERIAL)]
        os.makedirs(os.path.join(work, "serial"))
        p = _daemon(os.path.join(work, "serial"), gitlab, r, host, image, 1)
        ours = []
        for i in range(SERIAL + 1):
            job = gitlab.add_job(job_payload(script=["true"], variables=without_sources()),
                                 runner=r)
            gitlab.wait_for_job(job, "success", timeout=120)
            got = [q for q in gitlab.requests_for("POST", r"/jobs/request$")
                   if q.response_status == 201 and q.response_body and
                   json.loads(q.response_body).get("id") == job.id][0]
            final = [q for q in gitlab.requests_for("PUT", rf"/jobs/{job.id}$")
                     if q.response_status == 200 and q.json().get("state") == "success"][0]
            if i > 0:                   # the first makes the bundle volume
                ours.append(final.time - got.answered)
        stop_daemon(p)
        p = None
        floor = statistics.median(floors)
        rows.append(figure("docker job, one `true`, 201 to final report accepted",
                           ours, "s", goal="≤ 1.2 × the floor", limit=1.2 * floor,
                           limit_what="1.2 × the engine's floor, same calls by a minimal "
                                      "client, this run"))
        rows.append(figure("the engine's floor for the same stages", floors, "s"))

        # 2. memory per concurrent job.
        d2 = os.path.join(work, "memory")
        os.makedirs(d2)
        p = _daemon(d2, gitlab, r, host, image, CONCURRENT_JOBS)
        time.sleep(3)
        idle = _rss_anon(p.pid)
        jobs = [gitlab.add_job(job_payload(script=["sleep 600"],
                                           variables=without_sources()), runner=r)
                for _ in range(CONCURRENT_JOBS)]
        wait_for(lambda: all("$ sleep 600" in j.log_text for j in jobs), 600,
                 f"{CONCURRENT_JOBS} docker jobs running", interval=0.5)
        busy = _rss_anon(p.pid)
        rows.append(figure(f"daemon RssAnon per running docker job ({CONCURRENT_JOBS} jobs)",
                           (busy - idle) / CONCURRENT_JOBS, "KiB", goal="≤ 200 KiB",
                           note=f"idle {idle} KiB, with the jobs {busy} KiB"))
        for j in jobs:
            j.cancel()
        wait_for(lambda: gitlab.jobs_final([j.id for j in jobs]) or
                 all(j.status == "canceled" for j in jobs), 300, "the jobs canceled", 0.5)
        stop_daemon(p, 120)
        p = None

        # 3. many short jobs.
        d3 = os.path.join(work, "many")
        os.makedirs(d3)
        p = _daemon(d3, gitlab, r, host, image, 8)
        t0 = time.monotonic()
        first = None
        done = 0
        batch = [gitlab.add_job(job_payload(script=["true"], variables=without_sources()),
                                runner=r) for _ in range(n_short)]
        while done < n_short:
            done = sum(1 for j in batch if j.status in ("success", "failed"))
            if first is None and done >= n_short // 10:
                first = _rss_anon(p.pid)
            if time.monotonic() - t0 > 3600:
                break
            time.sleep(0.5)
        last = _rss_anon(p.pid)
        took = time.monotonic() - t0
        failed = sum(1 for j in batch if j.status != "success")
        stop_daemon(p, 120)
        p = None
        left = _leftovers(env)
        rows.append(figure(f"{n_short} short docker jobs, concurrent 8: objects left on the "
                           "engine", len(left), "objects", goal="0",
                           note=f"{failed} jobs not successful; {took:.0f} s in all"))
        rows.append(figure(f"{n_short} short docker jobs: RssAnon growth from the first tenth "
                           "to the end", (last - (first or last)), "KiB", goal="flat",
                           note=f"{first} KiB after a tenth, {last} KiB at the end"))
    finally:
        if p is not None:
            stop_daemon(p, 60)
        gitlab.stop()
    return rows
