"""idle: `runner run` with 1 and 50 entries, no jobs, long polling on.

The window is the issue's 60 s (BENCH_IDLE_S changes it; it is in each
figure's name).  The double holds a request LONG_POLL seconds rather than
GitLab's 50 so that the window sees several requests per entry; CPU per
request is measured from SETTLE s on, after start-up.  Memory is sampled
from /proc/<pid>/status once a second; growth is given for each half of
what follows SETTLE, so warm-up (first half only) can be told from a leak
(both halves).
"""
import os
import time

from common import cpu_seconds, figure, proc_status, start_daemon, stop_daemon

ID = "idle"
TITLE = "idle daemon: memory, growth, CPU per job request"
WINDOW = int(os.environ.get("BENCH_IDLE_S", "60"))
SETTLE = 10
LONG_POLL = 5


def _idle(work, n):
    from daemon_helpers import config_text, entry, new_token
    from gitlab_double import GitLabDouble

    gitlab = GitLabDouble(long_poll=LONG_POLL).start()
    d = os.path.join(work, f"n{n}")
    os.makedirs(d)
    cfg = os.path.join(d, "config.toml")
    try:
        entries = [entry(gitlab, gitlab.add_runner(token=new_token()), f"idle-{i}")
                   for i in range(n)]
        with open(cfg, "w") as f:
            # gitlab-runner's default check_interval; one slot per entry so
            # no entry's hold waits on another's.
            f.write(config_text(entries, concurrent=n, check_interval=3))
        t0 = time.monotonic()
        p = start_daemon(cfg, d)
        samples, cpu_at = [], {}
        for second in range(1, WINDOW + 1):
            time.sleep(max(0.0, t0 + second - time.monotonic()))
            if p.poll() is not None:
                raise RuntimeError(f"runner run exited {p.returncode} after {second} s")
            samples.append(proc_status(p.pid, "VmRSS", "RssAnon"))
            if second in (SETTLE, WINDOW):
                cpu_at[second] = cpu_seconds(p.pid)
        stop_daemon(p, 15)
        reqs = [r for r in gitlab.requests_for("POST", r"/jobs/request$")
                if t0 + SETTLE <= r.time < t0 + WINDOW]
        violations = gitlab.violations
    finally:
        gitlab.stop()
    last, at_settle = samples[-1], samples[SETTLE - 1]
    half = SETTLE + (WINDOW - SETTLE) // 2
    at_half = samples[half - 1]
    cpu = cpu_at[WINDOW] - cpu_at[SETTLE]
    tag = f"{n} entr{'y' if n == 1 else 'ies'}, {WINDOW} s"
    one = n == 1
    rows = [
        figure(f"VmRSS, {tag}", last["VmRSS"] / 1024, "MiB", anchor="32–50 MB",
               goal="≤ 14 MiB" if one else "—",
               note=f"the double holds {LONG_POLL} s, not GitLab's 50 s" if one else None),
        figure(f"RssAnon, {tag}", last["RssAnon"] / 1024, "MiB",
               goal="≤ 4 MiB" if one else "—"),
        figure(f"VmRSS growth {SETTLE}..{half} s, {tag}",
               at_half["VmRSS"] - at_settle["VmRSS"], "KiB", goal="0"),
        figure(f"VmRSS growth {half}..{WINDOW} s, {tag}",
               last["VmRSS"] - at_half["VmRSS"], "KiB", goal="0"),
        figure(f"RssAnon growth {SETTLE}..{half} s, {tag}",
               at_half["RssAnon"] - at_settle["RssAnon"], "KiB", goal="0"),
        figure(f"RssAnon growth {half}..{WINDOW} s, {tag}",
               last["RssAnon"] - at_half["RssAnon"], "KiB", goal="0"),
        figure(f"job requests {SETTLE}..{WINDOW} s (hold {LONG_POLL} s), {tag}", len(reqs), ""),
        # gitlab-runner's 7 mCPU is a rate (thousandths of a core), not per request.
        figure(f"CPU use {SETTLE}..{WINDOW} s, {tag}", cpu * 1e3 / (WINDOW - SETTLE), "mCPU",
               anchor="7 mCPU"),
        figure(f"CPU per job request, {tag}", cpu * 1e3 / max(1, len(reqs)), "ms", note=("double saw protocol violations: " + "; ".join(violations[:3]))
               if violations else None),
    ]
    return rows


def run(work):
    return _idle(work, 1) + _idle(work, 50)
