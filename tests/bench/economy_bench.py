"""economy: the requests the runner sends GitLab, per job and per idle hour.

One `runner run` daemon, three doubles:
- jobs: five jobs at once on one entry: chatty unwatched (a line every
  second, GitLab's interval for an unwatched job), chatty watched (the
  interval GitLab sends while someone has the job page open), quiet (no
  output, unwatched), "shortened" (chatty, unwatched until the bench
  switches the job to the watched interval mid-job) and "catch-up" (a
  6 MiB burst while the double answers its PATCHes 503 for 4 s);
- idle with long polling: an entry alone on a double that holds job
  requests (Workhorse);
- idle without: an entry on a double that answers at once, check_interval 3.

Time is scaled, honestly: the issue's jobs last 5 minutes; here every
duration is divided by SCALE (3 by default, BENCH_ECONOMY_SCALE=1 for real
time): the job, its line rate, the server's intervals (3 s watched, 60 s
unwatched: protocol.md 6.3), the runner's default interval (3 s) and its
keep-alive interval (30 s), the last two through the daemon's
RUNNER_TRACE_INTERVAL_MS / RUNNER_KEEPALIVE_MS.  X-GitLab-Trace-Update-Interval
is whole seconds, so SCALE is 1 or 3.  The request counts of a scaled job are
then those of the 5-minute one.  The catch-up job is not scaled: its rate
limit is absolute (requests per second).

Idle: GitLab holds a job request 50 s; the double holds HOLD s so the
window sees several holds.  What the runner adds to each hold (its wait
after the 204, the round trip) is measured, and the hour is extrapolated as
3600 / (50 s + that).  Without long polling the hour is measured directly.
"""
import json
import os
import statistics
import time

from common import daemon_env, figure, start_daemon, stop_daemon, wait_for

ID = "economy"
TITLE = "requests to GitLab per job and per idle entry-hour"
HOLD = 10                  # the double's long-poll hold (GitLab: 50 s)
GITLAB_HOLD = 50
IDLE_SETTLE = 5
CATCHUP_MB = 6
FAIL_S = 4                 # the catch-up job's PATCHes get 503 this long once its burst shows
BURST_LINE = "catch-up line of output"


def _scale():
    s = int(os.environ.get("BENCH_ECONOMY_SCALE", "3"))
    if s not in (1, 3):
        raise RuntimeError("BENCH_ECONOMY_SCALE must be 1 or 3 (intervals are whole seconds)")
    return s


def _chatty(seconds, period):
    return ("perl -e '$| = 1; $e = time + " + str(seconds) + "; $i = 0; "
            "while (time < $e) { printf \"line %d: compiling module_%04d.c\\n\", ++$i, $i; "
            "select(undef, undef, undef, " + f"{period:.3f}" + ") }'")


def _burst(mb):
    return ("perl -e '$s = \"" + BURST_LINE + ", seventy-odd bytes long..........."
            "...\\n\" x 1024; $n = " + str(mb << 20) + "; "
            "while ($n > 0) { print $s; $n -= length($s) }'")


def _job_requests(gitlab, job):
    """This job's requests in time order: the 201 that gave it, PUTs, PATCHes."""
    mine = [r for r in gitlab.requests_for("POST", r"/jobs/request$")
            if r.response_status == 201 and r.response_body
            and json.loads(r.response_body).get("id") == job.id]
    mine += gitlab.requests_for("*", rf"/jobs/{job.id}(/trace)?$")
    return sorted(mine, key=lambda r: r.time)


def _kind(r):
    if r.method == "POST":
        return "request"
    if r.method == "PATCH":
        return "patch"
    state = r.json().get("state") if r.body else None
    return "final" if state in ("success", "failed") else "put"


def _breakdown(reqs):
    n = {"request": 0, "put": 0, "patch": 0, "final": 0}
    for r in reqs:
        n[_kind(r)] += 1
    return (f"{n['request']} POST /jobs/request, {n['put'] + n['final']} PUT /jobs/:id "
            f"({n['final']} final), {n['patch']} PATCH trace")


def _running_phase(reqs):
    """The requests the periodic loop sent: after the ack PUT, before the final phase.

    The final phase starts with the PATCH that carries "Job succeeded" (the
    runner flushes the log at once when the job ends) or the final PUT.
    """
    out, acked = [], False
    for r in reqs:
        k = _kind(r)
        if k == "final" or (k == "patch" and b"Job succeeded" in r.body):
            break
        if k == "put" and not acked:
            acked = True            # the ack after pickup, not a periodic request
            continue
        if acked and k in ("put", "patch"):
            out.append(r)
    return out


def _interval(r, last):
    v = r.response_headers.get("X-GitLab-Trace-Update-Interval") \
        if r.response_headers is not None else None
    try:
        return int(v) if v is not None and int(v) > 0 else last
    except ValueError:
        return last


def _gap_ratios(periodic, default_s):
    """gap / server interval for each pair of consecutive periodic requests.

    The interval in force for a gap is the one the earlier request's answer
    carried (the runner keeps the last one when an answer has none).  A
    retried request (5xx) and a full 1 MiB PATCH (catch-up) are exempt.
    """
    ratios, interval = [], default_s
    for a, b in zip(periodic, periodic[1:]):
        interval = _interval(a, interval)
        if a.response_status is None or a.response_status >= 500:
            continue
        if a.method == "PATCH" and len(a.body) >= 1 << 20:
            continue
        ratios.append((b.time - a.time) / interval)
    return ratios


def _peak_rate(reqs, since=None, until=None):
    """Most requests in any 1 s window that starts at a request."""
    times = [r.time for r in reqs if (since is None or r.time >= since)
             and (until is None or r.time < until)]
    return max((sum(1 for u in times if t <= u < t + 1.0) for t in times), default=0)


def _daemon(work, cfg, env_extra):
    env = daemon_env(work)
    env.update(env_extra)
    return start_daemon(cfg, work, env)


def run(work):
    from daemon_helpers import config_text, entry, new_token, without_sources
    from gitlab_double import GitLabDouble, job_payload

    scale = _scale()
    job_s, watched, unwatched = 300 // scale, 3 // scale, 60 // scale
    period = 1.0 / scale
    jobs_gl = GitLabDouble().start()
    lp_gl = GitLabDouble(long_poll=HOLD).start()
    np_gl = GitLabDouble().start()
    doubles = (jobs_gl, lp_gl, np_gl)
    try:
        r_jobs = jobs_gl.add_runner(token=new_token())
        r_lp = lp_gl.add_runner(token=new_token())
        r_np = np_gl.add_runner(token=new_token())
        builds = os.path.join(work, "builds")
        entries = [entry(jobs_gl, r_jobs, "jobs", builds_dir=builds, output_limit=4 * 4096),
                   entry(lp_gl, r_lp, "idle-long-poll", builds_dir=builds),
                   entry(np_gl, r_np, "idle-no-long-poll", builds_dir=builds)]
        cfg = os.path.join(work, "config.toml")
        with open(cfg, "w") as f:
            # Five jobs and each entry's job request: no entry waits for a slot.
            f.write(config_text(entries, concurrent=8, check_interval=3))

        def add(name, script, interval):
            return jobs_gl.add_job(job_payload(name=name, script=script,
                                               variables=without_sources()),
                                   runner=r_jobs, update_interval=interval)

        jobs = {
            "chatty unwatched": add("chatty-unwatched", [_chatty(job_s, period)], unwatched),
            "chatty watched": add("chatty-watched", [_chatty(job_s, period)], watched),
            "quiet": add("quiet", [f"sleep {job_s}"], unwatched),
            "shortened": add("shortened", [_chatty(job_s, period)], unwatched),
            "catch-up": add("catch-up", ["sleep 1", _burst(CATCHUP_MB), "sleep 12"], watched),
        }
        catchup = jobs["catch-up"]
        catchup_trace = f"/api/v4/jobs/{catchup.id}/trace"

        burst = {}

        def failing(req):
            # From the first PATCH that carries the burst, for FAIL_S seconds.
            if "at" not in burst and BURST_LINE.encode() in req.body:
                burst["at"] = req.time
            return "at" in burst and req.time < burst["at"] + FAIL_S

        jobs_gl.script("PATCH", catchup_trace + "$", times=None, status=503,
                       predicate=failing)

        t0 = time.monotonic()
        p = _daemon(work, cfg, {"RUNNER_TRACE_INTERVAL_MS": str(3000 // scale),
                                "RUNNER_KEEPALIVE_MS": str(30000 // scale)})
        try:
            # Someone opens the "shortened" job's page a third of the way in.
            shortened = jobs["shortened"]
            wait_for(lambda: shortened.status != "pending", 30, "the jobs to be picked up",
                     interval=0.05)
            time.sleep(max(0.0, t0 + job_s / 3 - time.monotonic()))
            t_short = time.monotonic()
            shortened.update_interval = watched
            for j in jobs.values():
                jobs_gl.wait_for_job(j, ("success", "failed"), timeout=job_s + 120)
            t_end = time.monotonic()
        finally:
            stop_daemon(p, 20)
        violations = [v for g in doubles for v in g.violations]
        lp_reqs = [r for r in lp_gl.requests_for("POST", r"/jobs/request$")
                   if r.time >= t0 + IDLE_SETTLE]
        np_reqs = [r for r in np_gl.requests_for("POST", r"/jobs/request$")
                   if t0 + IDLE_SETTLE <= r.time < t_end]
        per_job = {name: _job_requests(jobs_gl, j) for name, j in jobs.items()}
        reports = {name: j.report() for name, j in jobs.items()}
    finally:
        for g in doubles:
            g.stop()
    for name, rep in reports.items():
        if rep["status"] != "success":
            raise RuntimeError(f"the {name} job ended {rep['status']}: {rep['log'][-400:]}")

    tag = "5-min job" if scale == 1 else f"5-min job scaled ÷{scale}"
    scaled_note = None if scale == 1 else (
        f"jobs of {job_s} s with every interval ÷{scale} (server {watched} s watched / "
        f"{unwatched} s unwatched, runner default {3 // scale} s, keep-alive {30 // scale} s): "
        "the counts are those of 5-minute jobs; BENCH_ECONOMY_SCALE=1 for real time")
    rows = []
    for name, anchor, goal in (("chatty unwatched", "~10", "≤ 10"),
                               ("chatty watched", "~104", "—"),
                               ("quiet", "~10–15", "—")):
        reqs = per_job[name]
        rows.append(figure(f"requests per {tag}, {name}", len(reqs), "", anchor=anchor,
                           goal=goal, note=_breakdown(reqs) + (
                               "; " + scaled_note if name == "chatty unwatched" and scaled_note
                               else "")))

    ratios = []
    for name in ("chatty unwatched", "chatty watched", "quiet", "shortened"):
        ratios += _gap_ratios(_running_phase(per_job[name]), 3 // scale)
    rows.append(figure("smallest gap between a job's periodic requests / server interval",
                       min(ratios), "", goal="≥ 1",
                       note=f"{len(ratios)} gaps of 4 jobs (PATCHes and keep-alive PUTs "
                            "while the job runs; the flush at the end, retries of a 5xx "
                            "and 1 MiB catch-up PATCHes are exempt); arrival to arrival at the double, whose "
                            "timestamps carry a few ms of thread scheduling under load, and "
                            "libuv timers count whole ms: 0.99x is within that"))

    cu = per_job["catch-up"]
    cu_run = _running_phase(cu)
    failed = [r for r in cu if r.method == "PATCH" and r.response_status == 503]
    if not failed:
        raise RuntimeError("the catch-up job's burst never met the 503s")
    burst_end = burst["at"] + FAIL_S
    behind = [r for r in cu_run if r.time >= burst_end]
    rows.append(figure(f"peak requests/s of one job: catch-up after a {FAIL_S} s 503 burst, "
                       f"{CATCHUP_MB} MiB behind", _peak_rate(behind), "req/s", goal="≤ 3",
                       note=f"most requests in any 1 s from the burst's end to the job's end "
                            f"({len(behind)} requests, {_breakdown(cu)}; {CATCHUP_MB} MiB of "
                            "output is more on the wire: timestamps)"))
    rows.append(figure("peak requests/s of one job while GitLab answers 503",
                       _peak_rate(cu_run, burst["at"], burst_end), "req/s", goal="≤ 3 (catch-up)",
                       note=f"{len(failed)} PATCHes answered 503 in {FAIL_S} s: a PATCH is "
                            "tried 5 times, 100 ms exponential backoff with jitter "
                            "(gitlab-runner's retry layer, protocol.md 8.2), then waits the "
                            "interval"))
    sh = per_job["shortened"]
    rows.append(figure(f"peak requests/s of one job after its interval shortens "
                       f"{unwatched} → {watched} s", _peak_rate(_running_phase(sh), t_short),
                       "req/s", goal="≤ 3", note=_breakdown(sh)))

    # Idle, long polling: what the runner adds to each hold, then GitLab's hour.
    # After each hold that timed out: how long until the runner asked again.
    added = [b.time - (a.answered or a.time) for a, b in zip(lp_reqs, lp_reqs[1:])
             if a.hold_outcome == "timeout"]
    if not added:
        raise RuntimeError(f"no long-poll hold ended in the idle window ({len(lp_reqs)} requests)")
    added = statistics.median(added)
    rows.append(figure(f"idle job requests per entry-hour, long polling ({GITLAB_HOLD} s hold)",
                       3600 / (GITLAB_HOLD + added), "req/h",
                       goal="≤ 80",
                       note=f"extrapolated: the double held {HOLD} s and the runner asked "
                            f"again {added:.3f} s (median) after each timed-out hold "
                            f"({len(lp_reqs)} requests in {t_end - t0 - IDLE_SETTLE:.0f} s); "
                            f"3600 / ({GITLAB_HOLD} + {added:.3f})"))
    window = t_end - (t0 + IDLE_SETTLE)
    rows.append(figure("idle job requests per entry-hour, no long polling, check_interval 3",
                       len(np_reqs) * 3600 / window, "req/h", anchor="1200/h",
                       note=f"{len(np_reqs)} requests in {window:.0f} s" + (
                           "; double saw protocol violations: " + "; ".join(violations[:3])
                           if violations else "")))
    return rows
