"""The ceilings figures are measured against, on this machine, in this run.

One function per ceiling; each returns a list of measurements (the figure
quotes their median) and is computed once per `make bench` run, however
many scenarios show it.  The `limits` scenario prints them all.

- bash_spawn_us: posix_spawn of `bash -c true` until it is reaped, µs;
- uv_pipe_mib_s: a child's output through a pipe into a libuv loop
  (build/tools/uv_pipe_bench: uv_read_start, one 64 KiB buffer, as
  executors/proc.c reads a job's output), MiB/s;
- crc32_mib_s: zlib's crc32 over a 64 MiB buffer, MiB/s;
- loopback_request_us: one GET to the GitLab double on 127.0.0.1, on a
  kept-alive connection and on a new one (build/tools/conn_bench, libcurl
  configured as api/http.c), µs.  The double is Python: this is the cost of
  a round trip to it, the floor under every request a scenario makes.
"""
import functools
import os
import re
import subprocess
import time
import zlib

from common import TOOLS

SPAWNS = 200
PIPE_MIB = 256
PIPE_RUNS = 3
CRC_RUNS = 3
REQUESTS = 200


@functools.lru_cache(maxsize=None)
def _bash_spawn_us():
    bash = "/bin/bash"
    argv, env = [bash, "-c", "true"], {"PATH": "/usr/bin:/bin"}
    out = []
    for _ in range(SPAWNS):
        t0 = time.perf_counter()
        pid = os.posix_spawn(bash, argv, env)
        os.waitpid(pid, 0)
        out.append((time.perf_counter() - t0) * 1e6)
    return tuple(out)


def bash_spawn_us():
    """Spawn of `bash -c true` to its exit, µs, SPAWNS times."""
    return list(_bash_spawn_us())


@functools.lru_cache(maxsize=None)
def _uv_pipe_mib_s():
    out = []
    for _ in range(PIPE_RUNS):
        text = subprocess.run([os.path.join(TOOLS, "uv_pipe_bench"), str(PIPE_MIB)],
                              check=True, capture_output=True, text=True).stdout
        out.append(float(re.search(r"mib_per_s=([0-9.]+)", text).group(1)))
    return tuple(out)


def uv_pipe_mib_s():
    """A child's writes through a pipe into a libuv loop, MiB/s, PIPE_RUNS runs."""
    return list(_uv_pipe_mib_s())


@functools.lru_cache(maxsize=None)
def _crc32_mib_s():
    data = os.urandom(64 << 20)
    out = []
    for _ in range(CRC_RUNS):
        t0 = time.perf_counter()
        zlib.crc32(data)
        out.append(64 / (time.perf_counter() - t0))
    return tuple(out)


def crc32_mib_s():
    """zlib's crc32 over 64 MiB, MiB/s, CRC_RUNS runs."""
    return list(_crc32_mib_s())


def conn_bench(mode, url, n, ca_file=None):
    """build/tools/conn_bench's lines as dicts (total_us, connect_us, tls_us)."""
    argv = [os.path.join(TOOLS, "conn_bench"), mode, url + "/api/v4/conn-bench", str(n)]
    if ca_file is not None:
        argv.append(ca_file)
    text = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return [{k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}
            for line in text.splitlines()]


@functools.lru_cache(maxsize=None)
def _loopback_request_us():
    from gitlab_double import GitLabDouble

    gitlab = GitLabDouble().start()
    try:
        kept = [r["total_us"] for r in conn_bench("keepalive", gitlab.url, REQUESTS)]
        fresh = [r["total_us"] for r in conn_bench("fresh", gitlab.url, REQUESTS)]
    finally:
        gitlab.stop()
    return tuple(kept), tuple(fresh)


def loopback_request_us(new_connection=False):
    """One GET to the double over loopback and its answer, µs, REQUESTS times."""
    kept, fresh = _loopback_request_us()
    return list(fresh if new_connection else kept)


def figures():
    """Every ceiling as a figure, for the `limits` scenario."""
    from common import figure

    spawn = bash_spawn_us()
    return [
        figure("spawn of bash -c true, until reaped", spawn, "µs",
               note=f"median of {len(spawn)} spawns (os.posix_spawn + waitpid)"),
        figure(f"pipe into a libuv loop, {PIPE_MIB} MiB", uv_pipe_mib_s(), "MiB/s",
               note="build/tools/uv_pipe_bench: a child writes 64 KiB blocks, the loop "
                    "reads with uv_read_start into one 64 KiB buffer"),
        figure("zlib crc32, 64 MiB", crc32_mib_s(), "MiB/s"),
        figure("loopback request to the double, kept-alive connection",
               loopback_request_us(), "µs",
               note=f"median of {REQUESTS} GETs (build/tools/conn_bench); the double "
                    "is Python, so this is mostly its own time"),
        figure("loopback request to the double, new connection",
               loopback_request_us(new_connection=True), "µs"),
    ]
