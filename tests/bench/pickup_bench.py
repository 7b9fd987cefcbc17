"""pickup: from a job's creation to the runner receiving it.

The latency is add_job() (taken while the runner waits for work, at a
random moment) to the moment the double finished writing the 201 that
carries the job (Request.answered).  Three modes:

- long poll: the double holds job requests (Workhorse, 50 s as GitLab);
  the job releases the hold with a 204 (the queue value changed) and the
  runner must ask again to get it;
- 3 s polling: no long polling, check_interval = 3;
- 3 entries, concurrent = 2: two entries are held (STUCK = []         # jobs `true` that had not ended 30 s after pickup (see run())
HOLD3 = 6 s, not 50, to
  keep the run short) when a job appears for the third; the goal is that
  the third does not wait for another's hold to end.

check_interval is 3 (gitlab-runner's default) but in the long-poll mode,
where it is 1 to take samples faster: a job ends a hold with Workhorse's
204, which the runner answers at once, so it is not in the measured path.
The jobs are `true`.  BENCH_PICKUP_SAMPLES sets the samples of
the first two modes (default 20; the third takes a quarter of that).
"""
import json
import os
import random
from functools import partial
import shutil
import time

from common import OUT, figure, start_daemon, stop_daemon, wait_for

ID = "pickup"
TITLE = "job creation to 201 received"
HOLD = 50          # GitLab's long-poll hold: a job releases it, so the run is not longer
STUCK = []         # jobs `true` that had not ended 30 s after pickup (see run())
HOLD3 = 6          # the third mode waits out holds: shortened from 50 s


def _stop(p):
    if STUCK:
        # Keep the daemon's log of a job that hung, for whoever looks into it.
        os.makedirs(OUT, exist_ok=True)
        shutil.copy(p.args[p.args.index("-d") + 1] + "/stderr",
                    os.path.join(OUT, f"pickup-stuck-{STUCK[-1]}.stderr"))
    stop_daemon(p, 20)


def _holding(gitlab, runner):
    """A job request of this runner that Workhorse holds right now."""
    return any(r.hold_outcome == "holding" and runner.token.encode() in r.body
               for r in gitlab.requests_for("POST", r"/jobs/request$"))


def _answer_201(gitlab, job):
    for r in gitlab.requests_for("POST", r"/jobs/request$"):
        if r.response_status == 201 and r.answered is not None and r.response_body \
                and json.loads(r.response_body).get("id") == job.id:
            return r
    return None


def _sample(gitlab, runner, payload, delay, timeout):
    """Add a job after delay s; the seconds until its 201 was written."""
    time.sleep(delay)
    t = time.monotonic()
    job = gitlab.add_job(payload, runner=runner)
    r = wait_for(lambda: _answer_201(gitlab, job), timeout, f"job {job.id} to be picked up",
                 interval=0.0005)
    try:
        gitlab.wait_for_job(job, ("success", "failed"), timeout=30)
    except TimeoutError:
        STUCK.append(job.id)        # not this scenario's figure: said in the note
        return r.answered - t
    if job.status != "success":
        raise RuntimeError(f"job {job.id} ended {job.status}: {job.report()['log'][-300:]}")
    return r.answered - t


def _setup(work, name, n_entries, concurrent, long_poll, check_interval=3):
    from daemon_helpers import config_text, entry, new_token
    from gitlab_double import GitLabDouble

    gitlab = GitLabDouble(long_poll=long_poll).start()
    d = os.path.join(work, name)
    os.makedirs(d)
    runners = [gitlab.add_runner(token=new_token()) for _ in range(n_entries)]
    cfg = os.path.join(d, "config.toml")
    with open(cfg, "w") as f:
        f.write(config_text([entry(gitlab, r, f"{name}-{i}", builds_dir=os.path.join(d, "b"))
                             for i, r in enumerate(runners)],
                            concurrent=concurrent, check_interval=check_interval))
    return gitlab, runners, start_daemon(cfg, d)


def _long_poll(work, payload, n):
    # check_interval 1: a job ends a hold with Workhorse's 204, which the
    # runner answers at once; check_interval only spaces the samples.
    gitlab, (r,), p = _setup(work, "long-poll", 1, 4, HOLD, check_interval=1)
    try:
        out = []
        for _ in range(n):
            wait_for(lambda: _holding(gitlab, r), 30, "a held job request", interval=0.002)
            out.append(_sample(gitlab, r, payload, random.uniform(0.0, 0.5), 30))
        return out, gitlab.violations
    finally:
        _stop(p)
        gitlab.stop()


def _polling(work, payload, n):
    gitlab, (r,), p = _setup(work, "polling", 1, 4, 0)
    try:
        out = []
        for _ in range(n):
            # A random moment of the 3 s cycle: after an answered request.
            seen = len(gitlab.requests_for("POST", r"/jobs/request$"))
            wait_for(lambda: len(gitlab.requests_for("POST", r"/jobs/request$")) > seen, 30,
                     "a job request", interval=0.002)
            out.append(_sample(gitlab, r, payload, random.uniform(0.0, 3.0), 30))
        return out, gitlab.violations
    finally:
        _stop(p)
        gitlab.stop()


def _three_entries(work, payload, n, concurrent):
    gitlab, (r1, r2, r3), p = _setup(work, f"three-{concurrent}", 3, concurrent, HOLD3)
    try:
        out = []
        for _ in range(n):
            # With a slot for each, the third waits for nothing but its own
            # previous job's end: wait for its hold too, as long poll does.
            wait_for(lambda: _holding(gitlab, r1) and _holding(gitlab, r2) and
                     (concurrent < 3 or _holding(gitlab, r3)), 3 * HOLD3,
                     "the entries held at once", interval=0.002)
            out.append(_sample(gitlab, r3, payload, random.uniform(0.0, 0.5), 3 * HOLD3))
        return out, gitlab.violations
    finally:
        _stop(p)
        gitlab.stop()


def _pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def run(work):
    from daemon_helpers import without_sources
    from gitlab_double import job_payload

    n = int(os.environ.get("BENCH_PICKUP_SAMPLES", "20"))
    payload = job_payload(script=["true"], variables=without_sources())
    rows = []
    for name, fn, k, anchor, goals in (
            ("long poll", _long_poll, n, "~2 RTT", ("≤ 5 ms", "≤ 20 ms")),
            ("3 s polling", _polling, n, "mean 1.5 s", ("—", "—")),
            # Fewer slots than entries: a held request keeps its slot (a job
            # may come back on it), so the third waits; the runner warns.
            ("3 entries, concurrent 2, 2 held", partial(_three_entries, concurrent=2),
             max(3, n // 4), f"up to the hold ({HOLD3} s here, 50 s on GitLab)",
             ("no wait on another's hold", "no wait on another's hold")),
            ("3 entries, concurrent 3, 2 held", partial(_three_entries, concurrent=3),
             max(3, n // 4), f"up to the hold ({HOLD3} s here, 50 s on GitLab)",
             ("≤ 5 ms", "≤ 20 ms"))):
        stuck_before = len(STUCK)
        lat, violations = fn(work, payload, k)
        ms = [x * 1000 for x in lat]
        note = (f"{len(ms)} samples, min {min(ms):.1f} ms, max {max(ms):.1f} ms, "
                f"mean {sum(ms) / len(ms):.1f} ms")
        if name.startswith("3 entries"):
            note += f"; the double holds {HOLD3} s, not GitLab's 50 s"
        if len(STUCK) > stuck_before:
            note += (f"; jobs {STUCK[stuck_before:]} (`true`) had not ended 30 s after pickup: "
                     "a runner hang, not a pickup figure (daemon log in build/bench/)")
        if violations:
            note += "; double saw protocol violations: " + "; ".join(violations[:3])
        rows.append(figure(f"creation → 201, {name}, p50", ms, "ms",
                           anchor=anchor, goal=goals[0], note=note))
        rows.append(figure(f"creation → 201, {name}, p99", _pct(ms, 0.99), "ms",
                           goal=goals[1]))
    return rows
