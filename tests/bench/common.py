"""What every scenario shares: paths, the figure record, /proc readers.

A scenario module has ID, TITLE and run(work) -> list of figure() dicts;
run.py prints and stores them.  Values are kept raw (every run) so the
JSON can be read again without re-running.
"""
import os
import signal
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNNER = os.path.join(ROOT, "build", "runner")
TOOLS = os.path.join(ROOT, "build", "tools")
# BENCH_OUT: somewhere else (the driver's own test must not overwrite a real run's figures).
OUT = os.environ.get("BENCH_OUT") or os.path.join(ROOT, "build", "bench")

# The double and the daemon helpers live with the tests.
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))


def figure(name, values, unit, anchor="—", goal="—", limit=None, limit_unit=None,
           limit_what=None, note=None):
    """One row: values are every run's measurement; limit likewise (or None)."""
    values = [values] if isinstance(values, (int, float)) else list(values)
    row = {"figure": name, "unit": unit, "values": values,
           "median": statistics.median(values), "min": min(values), "max": max(values),
           "anchor": anchor, "goal": goal, "limit": None}
    if limit is not None:
        limit = [limit] if isinstance(limit, (int, float)) else list(limit)
        row["limit"] = {"what": limit_what, "unit": limit_unit or unit, "values": limit,
                        "median": statistics.median(limit)}
    if note:
        row["note"] = note
    return row


def daemon_env(work):
    """The environment a benchmark's daemon runs in: ours without RUNNER_*
    settings or CONFIG_FILE, and HOME an empty directory under work.

    Jobs run login shells, and this machine's ~/.profile runs a pyenv rehash
    that waits on a lock shared with every shell on the machine: a job
    stalled 30 s on it.  The goals exclude profile time; /etc/profile runs.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNNER_")}
    env.pop("CONFIG_FILE", None)
    env["HOME"] = os.path.join(work, "home")
    os.makedirs(env["HOME"], exist_ok=True)
    return env


def start_daemon(cfg, work, env=None, cwd=None):
    """`runner run -c cfg -d work` in daemon_env(work) (or env); stderr to
    work/stderr, for whoever looks into a run that went wrong."""
    return subprocess.Popen([RUNNER, "run", "-c", cfg, "-d", work],
                            env=env if env is not None else daemon_env(work), cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(work, "stderr"), "w"))


def stop_daemon(p, timeout=30):
    """SIGQUIT, as a deploy would (finish the jobs, then exit); SIGKILL
    when that takes more than timeout seconds."""
    if p.poll() is not None:
        return
    p.send_signal(signal.SIGQUIT)
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def proc_status(pid, *keys):
    """{key: KiB} from /proc/pid/status (VmRSS, RssAnon, VmHWM...); {} once gone."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in keys:
                    out[k] = int(v.split()[0])
    except (FileNotFoundError, ProcessLookupError):
        return {}
    return out


def cpu_seconds(pid):
    """CPU time of pid (all its threads) in seconds.

    utime+stime of /proc/pid/stat count in 10 ms ticks, too coarse for an
    idle daemon; the schedstat run times are nanoseconds but lose threads
    that have exited.  The larger of the two is the better estimate.
    """
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    ns = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return max(ticks, ns / 1e9)


def wait_for(predicate, timeout, what, interval=0.001):
    """As the tests' wait_until, but a scenario that cannot go on raises."""
    from gitlab_double import poll_until
    try:
        return poll_until(predicate, timeout, interval)
    except TimeoutError:
        raise RuntimeError(f"timed out after {timeout} s waiting for {what}") from None
