"""outage: 1,000 idle entries (10 processes x 100) while GitLab is gone for 60 s.

The double long-polls job requests for 5 s.  Once every entry is long
polling, every request is answered 503 without Retry-After (a load balancer
whose backends are down) for S seconds; then GitLab answers again and
nothing else changes (no job is queued, so nothing but the runners' own
pacing shapes the return).

Figures:
- job requests the double received during the outage, all entries, and the
  most from one entry;
- the recovery wave: the most entries that asked within one second after
  GitLab was back;
- the time from GitLab's return until every entry has asked again.

Beside each, what gitlab-runner would send, computed from its published
constants (network/retry_requester.go: 5 attempts, backoff 100 ms doubling;
common/consts.go: unhealthy_requests_limit 3; checks every check_interval)
with the same check_interval and unhealthy_interval, entries phased evenly
over one check_interval as its feed does.  unhealthy_interval is 60 s here,
as in the measurement that filed the issue (its default is an hour).
S = 60 by default (BENCH_OUTAGE_SECONDS changes it).
"""
import os
import time

from common import figure, start_daemon, stop_daemon, wait_for

ID = "outage"
TITLE = "GitLab gone for 60 s under 1,000 idle entries (10 processes x 100)"
PROCESSES = 10
PER_PROCESS = 100
CHECK_INTERVAL = 3
UNHEALTHY_INTERVAL = 60
LONG_POLL = 5
JOB_REQUEST = r"^/api/v4/jobs/request$"

# gitlab-runner's constants (see the docstring).
GR_ATTEMPTS = 5
GR_BACKOFF_S = (0.1, 0.2, 0.4, 0.8)      # the waits between its 5 attempts, at most
GR_UNHEALTHY_LIMIT = 3


def gitlab_runner_model(outage, entries, check=CHECK_INTERVAL, unhealthy=UNHEALTHY_INTERVAL):
    """(requests during the outage, [when each entry asks again, s after the return]).

    One entry's checks start at its phase and come every `check` s; each
    failed check sends GR_ATTEMPTS requests (the retry layer); after
    GR_UNHEALTHY_LIMIT failed checks in a row the entry is left alone for
    `unhealthy` s, then checked again with its count reset.  The long poll
    each entry held when the outage began ends within LONG_POLL s and is
    its first failed check.
    """
    total, back = 0, []
    for i in range(entries):
        t = LONG_POLL * i / entries          # its long poll ends, it asks again: a check
        failures = 0
        while t < outage:
            span = 0.0
            for a in range(GR_ATTEMPTS):
                if t + span < outage:
                    total += 1
                if a < len(GR_BACKOFF_S):
                    span += GR_BACKOFF_S[a]
            failures += 1
            if failures >= GR_UNHEALTHY_LIMIT:
                t += span + unhealthy
                failures = 0
            else:
                t += max(check, span)
        back.append(t - outage)
    return total, back


def busiest_second(times_tokens):
    """The most distinct entries asking within one sliding second."""
    pts = sorted(times_tokens)
    best, j = 0, 0
    for i in range(len(pts)):
        while pts[j][0] <= pts[i][0] - 1.0:
            j += 1
        best = max(best, len({tok for _, tok in pts[j:i + 1]}))
    return best


def _tokens(gitlab, since=0.0, until=float("inf")):
    out = []
    for q in gitlab.requests_for("POST", JOB_REQUEST):
        if since <= q.time < until:
            try:
                out.append((q.time, q.json().get("token")))
            except ValueError:
                pass
    return out


def run(work):
    from daemon_helpers import config_text, entry, new_token
    from gitlab_double import GitLabDouble

    outage = int(os.environ.get("BENCH_OUTAGE_SECONDS", "60"))
    entries = PROCESSES * PER_PROCESS
    gitlab = GitLabDouble(long_poll=LONG_POLL).start()
    procs = []
    try:
        runners = [gitlab.add_runner(token=new_token()) for _ in range(entries)]
        for p in range(PROCESSES):
            d = os.path.join(work, f"p{p}")
            os.makedirs(d)
            cfg = os.path.join(d, "config.toml")
            mine = runners[p * PER_PROCESS:(p + 1) * PER_PROCESS]
            with open(cfg, "w") as f:
                f.write(config_text([entry(gitlab, r, f"idle-{p}-{i}",
                                           unhealthy_interval=f"{UNHEALTHY_INTERVAL}s",
                                           builds_dir=os.path.join(d, "builds"))
                                     for i, r in enumerate(mine)],
                                    concurrent=PER_PROCESS + 1, check_interval=CHECK_INTERVAL))
            procs.append(start_daemon(cfg, d))

        def steady():
            seen = {}
            for _, tok in _tokens(gitlab):
                seen[tok] = seen.get(tok, 0) + 1
            return len(seen) == entries and min(seen.values()) >= 2
        wait_for(steady, 180, "every entry long polling", interval=1.0)
        start = time.monotonic()
        gitlab.storm(outage, status=503)
        time.sleep(outage)
        back_at = start + outage
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"runner run exited {p.returncode} during the outage")

        def all_back():
            return len({tok for _, tok in _tokens(gitlab, back_at)}) == entries
        wait_for(all_back, 3 * UNHEALTHY_INTERVAL, "every entry asking again", interval=0.5)
        after = _tokens(gitlab, back_at)
        first = {}
        for t, tok in after:
            first.setdefault(tok, t)
        all_back_s = max(first.values()) - back_at
        wave = busiest_second([(t, tok) for t, tok in after if t <= back_at + all_back_s + 1])
        during = _tokens(gitlab, start, back_at)
    finally:
        for p in procs:
            stop_daemon(p, 30)
        gitlab.stop()

    per_entry = {}
    for _, tok in during:
        per_entry[tok] = per_entry.get(tok, 0) + 1
    gr_total, gr_back = gitlab_runner_model(outage, entries)
    gr_wave = busiest_second([(b, i) for i, b in enumerate(gr_back)])
    tag = f"{entries} entries, {outage} s of 503"
    gr = "gitlab-runner, computed"
    return [
        figure(f"job requests during the outage, {tag}", len(during), "requests",
               goal="1 probe per window per process", limit=gr_total, limit_what=gr,
               note="the long polls held when it began end in it and ask once more"),
        figure("job requests during the outage, the most from one entry",
               max(per_entry.values()) if per_entry else 0, "requests", goal="≤ 3",
               limit=gr_total / entries, limit_what=gr + ", each entry"),
        figure("recovery wave: most entries asking within one second", wave, "entries",
               goal=f"< {entries // 2}", limit=gr_wave, limit_what=gr),
        figure("GitLab back to every entry asking again", all_back_s, "s",
               goal="≤ 8 s + check_interval", limit=max(gr_back), limit_what=gr,
               note="ours: the probe window open when GitLab came back (4 .. 8 s) "
                    "plus the spread over check_interval"),
    ]
