"""storm: every request answered 429 with Retry-After while 50 jobs run.

50 jobs, each printing a line every 100 ms, run through one daemon
(concurrent = 50).  Once all 50 are running the double answers every
request 429 `Retry-After: W` for S seconds.  Halfway through the storm
the jobs are told to end (a file they watch appears), so their final
reports (the last PATCHes, then the final PUT) are due while GitLab
refuses everything and must outlive the storm.

Figures:
- requests the daemon sent during the storm, per endpoint class (job
  request, trace PATCH, job PUT), in all and in the busiest Retry-After
  window (the goal: at most one probe per class per window);
- jobs lost: jobs that did not end success with the double's crc32 of the
  log it received equal to the final report's checksum;
- the daemon's peak VmRSS/RssAnon during the storm, sampled every 0.25 s,
  and its growth over the last sample before the storm;
- drain time: from the storm's end until the double has accepted every
  job's final report, against the double's trace update interval.
S = 120 and W = 30 by default, the issue's size (BENCH_STORM_SECONDS and
BENCH_STORM_RETRY_AFTER change them).
"""
import os
import re
import time

from common import figure, proc_status, start_daemon, stop_daemon, wait_for

ID = "storm"
TITLE = "429 storm with Retry-After while 50 jobs run"
JOBS = 50
CLASSES = (("job request", "POST", r"/jobs/request$"),
           ("trace PATCH", "PATCH", r"/jobs/\d+/trace$"),
           ("job PUT", "PUT", r"/jobs/\d+$"))


def _job_script(stop):
    # perl: one process per job rather than a `sleep` fork every 100 ms.
    return ["perl -e '$| = 1; $i = 0; until (-e \"" + stop + "\") { "
            "printf \"line %06d of a job that keeps writing while GitLab refuses\\n\", $i++; "
            "select(undef, undef, undef, 0.1) }'"]


def _classify(req):
    for name, method, path in CLASSES:
        if req.method == method and re.search(path, req.path):
            return name
    return "other"


def run(work):
    from daemon_helpers import config_text, entry, new_token, without_sources
    from gitlab_double import GitLabDouble, job_payload

    seconds = int(os.environ.get("BENCH_STORM_SECONDS", "120"))
    window = int(os.environ.get("BENCH_STORM_RETRY_AFTER", "30"))
    scaled = (seconds, window) != (120, 30)
    stop = os.path.join(work, "stop")
    gitlab = GitLabDouble().start()
    p = None
    try:
        r = gitlab.add_runner(token=new_token())
        cfg = os.path.join(work, "config.toml")
        with open(cfg, "w") as f:
            f.write(config_text([entry(gitlab, r, "storm",
                                       builds_dir=os.path.join(work, "builds"))],
                                concurrent=JOBS, check_interval=3, shutdown_timeout=30))
        jobs = [gitlab.add_job(job_payload(script=_job_script(stop),
                                           variables=without_sources({})), runner=r)
                for _ in range(JOBS)]
        interval = jobs[0].update_interval
        final_at = {}

        def on_answer(req):
            # The moment the double took a job's final report (200 to a final PUT).
            if req.method == "PUT" and req.response_status == 200:
                m = re.search(r"/jobs/(\d+)$", req.path)
                try:
                    state = req.json().get("state")
                except ValueError:
                    state = None
                if m and state in ("success", "failed"):
                    final_at.setdefault(int(m.group(1)), time.monotonic())
        gitlab.listeners.append(on_answer)
        p = start_daemon(cfg, work)
        # Every job running and its log arriving: the storm hits a working daemon.
        wait_for(lambda: all(j.status == "running" and len(j.trace) > 0 for j in jobs),
                 120, "all 50 jobs running with some log received", interval=0.1)
        before = proc_status(p.pid, "VmRSS", "RssAnon")
        t_storm = time.monotonic()
        gitlab.storm(seconds, status=429, headers={"Retry-After": str(window)})
        t_end = t_storm + seconds
        peak = {"VmRSS": 0, "RssAnon": 0}
        stopped = False
        while time.monotonic() < t_end:
            if p.poll() is not None:
                raise RuntimeError(f"runner run exited {p.returncode} during the storm")
            s = proc_status(p.pid, "VmRSS", "RssAnon")
            for k in peak:
                peak[k] = max(peak[k], s.get(k, 0))
            if not stopped and time.monotonic() >= t_storm + seconds / 2:
                open(stop, "w").close()       # the jobs end while GitLab still refuses
                stopped = True
            time.sleep(min(0.25, max(0.0, t_end - time.monotonic())))
        if not stopped:
            open(stop, "w").close()
        # Drained: the double has taken every job's final report.
        drain_limit = max(300, seconds * 3)
        try:
            wait_for(lambda: gitlab.jobs_final([j.id for j in jobs]), drain_limit,
                     "every final report", interval=0.05)
        except RuntimeError:
            pass                              # lost jobs are a figure, not an error
        finals = [final_at[j.id] for j in jobs if j.id in final_at]
        drained_at = max(finals) if len(finals) == JOBS else None
        during = [q for q in gitlab.requests if t_storm <= q.time < t_end]
        reports = [j.report() for j in jobs]
        dump = os.environ.get("BENCH_STORM_DUMP")
        if dump:                              # the request timeline, for looking into a run
            with open(dump, "w") as f:
                for q in gitlab.requests:
                    f.write(f"{q.time - t_storm:9.3f} {q.method} {q.path} "
                            f"{q.response_status}\n")
        violations = gitlab.violations
    finally:
        if p is not None and p.poll() is None:
            stop_daemon(p, 40)
        gitlab.stop()

    lost = [x for x in reports if x["status"] != "success" or not x["checksum_ok"]]
    windows = max(1, -(-seconds // window))
    tag = f"{JOBS} jobs, {seconds} s storm, Retry-After {window}"
    rows = []
    for name, _, _ in CLASSES:
        mine = [q for q in during if _classify(q) == name]
        per = [0] * windows
        for q in mine:
            per[min(windows - 1, int((q.time - t_storm) // window))] += 1
        rows.append(figure(f"{name}s during the storm, {tag}", len(mine), "requests",
                           anchor="each request retried alone, 5 tries",
                           goal=f"≤ {windows} ({windows} windows)"))
        rows.append(figure(f"{name}s in the busiest {window} s window", max(per), "requests",
                           goal="≤ 1"))
    other = [q for q in during if _classify(q) == "other"]
    if other:
        rows.append(figure("other requests during the storm", len(other), "requests"))
    rows += [
        figure(f"jobs lost (not success with the checksum accepted), {tag}", len(lost),
               "jobs", goal="0",
               note=("lost: " + "; ".join(f"job {x['id']} {x['status']} "
                                          f"checksum_ok={x['checksum_ok']}"
                                          for x in lost[:5])) if lost else
               (f"{seconds} s with Retry-After {window}, not the issue's 120 s / 30 s "
                "(BENCH_STORM_SECONDS=120 BENCH_STORM_RETRY_AFTER=30)" if scaled else None)),
        figure("daemon VmRSS peak during the storm", peak["VmRSS"] / 1024, "MiB"),
        figure("daemon RssAnon peak during the storm", peak["RssAnon"] / 1024, "MiB"),
        figure("daemon RssAnon peak growth over the storm's start",
               peak["RssAnon"] - before.get("RssAnon", 0), "KiB"),
    ]
    if drained_at is not None:
        rows.append(figure("drain: storm's end to the last final report accepted",
                           max(0.0, drained_at - t_end), "s",
                           goal=f"≤ 2 intervals ({2 * interval} s)",
                           note=f"the double's X-GitLab-Trace-Update-Interval is {interval} s"))
    else:
        rows.append(figure("drain: storm's end to the last final report accepted",
                           drain_limit, "s", goal=f"≤ 2 intervals ({2 * interval} s)",
                           note=f"not drained: {JOBS - len(finals)} jobs had no final report "
                                f"accepted when the scenario stopped waiting ({drain_limit} s)"))
    if violations:
        rows[-1].setdefault("note", "")
        rows[-1]["note"] += " double saw protocol violations: " + "; ".join(violations[:3])
    return rows
