"""A GitLab that goes away, seen by 100 idle entries of one `runner run`.

GitLab long-polls job requests for 5 s.  For 30 s it is gone: every request
is answered 503 without Retry-After (a load balancer whose Rails backends
are down), or nothing listens (connection refused).  Then it is back, and a
job any of the runners may take is queued.  A client that helps a GitLab
come back sends almost nothing during the outage (one probe per window for
the whole process, not retries per entry), then returns spread over
check_interval rather than as one wave, and picks the job up at once.

unhealthy_interval = 4s caps the probe windows (1 s doubling, capped at the
shortest unhealthy_interval, never above 8 s): the pickup bound below
follows from it.  With the default cap a probe may come up to 8 s after
GitLab is back; the `outage` benchmark measures that.
"""
import re
import socket
import time
import urllib.request

from daemon_helpers import GATE_DEFAULTS, daemons, entry, new_token, wait_until, without_sources  # noqa: F401
from gitlab_double import job_payload

ENTRIES = 100
OUTAGE_S = 30
CHECK_INTERVAL_S = 3
JOB_REQUEST = r"^/api/v4/jobs/request$"
CLASS_METRIC = 'runner_api_endpoint_held{method="POST",endpoint="/jobs/request"}'


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(base, name_and_labels):
    with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith(name_and_labels + " "):
            return float(line.split()[-1])
    return None


def job_attempts(base):
    """Every attempt at POST /jobs/request the daemon counted, whatever its outcome."""
    with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(float(l.split()[-1]) for l in text.splitlines()
               if l.startswith('runner_api_requests_total{method="POST",endpoint="/jobs/request",'))


def start_fleet(gitlab, daemons):
    runners = [gitlab.add_runner(token=new_token(), id=5000 + i) for i in range(ENTRIES)]
    entries = [entry(gitlab, r, f"idle-{i:03d}", unhealthy_interval="4s")
               for i, r in enumerate(runners)]
    port = free_port()
    d = daemons(gitlab, entries, env=GATE_DEFAULTS, concurrent=ENTRIES + 1,
               check_interval=CHECK_INTERVAL_S, listen_address=f"127.0.0.1:{port}")
    d.start()
    # Steady state: every entry has been answered once and is long polling.
    wait_until(lambda: all(len(v) >= 2 for v in by_token(gitlab).values()) and
               len(by_token(gitlab)) == ENTRIES, 30, "every entry long polling", interval=0.5)
    return d, runners, f"http://127.0.0.1:{port}"


def by_token(gitlab, since=0.0):
    """The job requests the double received since `since`, by runner token."""
    out = {}
    for q in gitlab.requests_for("POST", JOB_REQUEST):
        if q.time >= since:
            try:
                out.setdefault(q.json().get("token"), []).append(q)
            except ValueError:
                pass
    return out


def busiest_second(requests):
    """The most entries that asked within one second (a sliding window)."""
    reqs = sorted(requests, key=lambda q: q.time)
    best = 0
    for i, q in enumerate(reqs):
        tokens = {p.json().get("token") for p in reqs[i:] if p.time < q.time + 1.0}
        best = max(best, len(tokens))
    return best


def recover_and_check(gitlab, d, runners, base, back_at):
    """GitLab is back at back_at (monotonic): a job is queued for any runner."""
    job = gitlab.add_job(job_payload(variables=without_sources(), script=["echo back"]))
    gitlab.wait_for_job(job, statuses=("running", "success", "failed"), timeout=15)
    taken = [q for q in gitlab.requests_for("POST", JOB_REQUEST)
             if q.response_status == 201]
    assert len(taken) == 1
    assert taken[0].time - back_at <= 5.0, f"picked up {taken[0].time - back_at:.1f} s after"
    gitlab.wait_for_job(job, timeout=30)
    assert job.status == "success", d.tail()

    # Every entry is back, spread over check_interval rather than in one wave.
    wait_until(lambda: len(by_token(gitlab, back_at)) == ENTRIES, 20, "every entry asking again",
               interval=0.2)
    time.sleep(2)
    # Entries, not requests: the queued job changed every runner's queue,
    # so each entry's first answer is Rails' at once and it asks again to
    # be held, as GitLab means it to (protocol.md 4.4).
    after = [q for q in gitlab.requests_for("POST", JOB_REQUEST)
             if back_at <= q.time < back_at + 15]
    assert busiest_second(after) < ENTRIES / 2, busiest_second(after)

    assert metric(base, CLASS_METRIC) == 0
    assert metric(base, 'runner_api_requests_held_back_total{method="POST",'
                        'endpoint="/jobs/request"}') >= ENTRIES / 2
    log = d.stderr
    holds = re.findall(r"api: POST http://127\.0\.0\.1:\d+/jobs/request: GitLab is "
                       r"failing \((.*)\) since \d\d:\d\d:\d\d: holding back every request "
                       r"to this endpoint; next probe in \d+ ms", log)
    assert len(holds) == 1, holds           # once for the class, not once per entry
    opens = re.findall(r"api: POST http://127\.0\.0\.1:\d+/jobs/request: GitLab (?:answers "
                       r"again \(HTTP \d+\)|holds a probe as a long poll) after \d+ s held since "
                       r"\d\d:\d\d:\d\d; (\d+) held requests resume over (\d+) ms", log)
    assert len(opens) == 1, opens
    assert int(opens[0][0]) >= ENTRIES / 2 and int(opens[0][1]) == CHECK_INTERVAL_S * 1000
    d.stop()
    d.assert_no_tokens()
    return holds[0]


def test_503_outage_one_probe_per_window_then_a_spread_return(gitlab_factory, daemons):
    gitlab = gitlab_factory(long_poll=5)
    d, runners, base = start_fleet(gitlab, daemons)
    start = time.monotonic()
    gitlab.storm(seconds=OUTAGE_S, status=503)
    time.sleep(OUTAGE_S / 2)
    assert metric(base, CLASS_METRIC) == 1
    time.sleep(start + OUTAGE_S - time.monotonic())
    what = recover_and_check(gitlab, d, runners, base, start + OUTAGE_S)
    assert what == "HTTP 503"

    seen = by_token(gitlab, start)
    for r in runners:
        during = [q for q in seen.get(r.token, ()) if q.time < start + OUTAGE_S]
        assert len(during) <= 3, (r.token[:12], [(round(q.time - start, 2), q.response_status,
                                                 q.headers.get("X-Request-Id")) for q in during])
    during = [q for q in gitlab.requests_for("POST", JOB_REQUEST)
              if start <= q.time < start + OUTAGE_S]
    # The long polls held when it began end in it and ask again (their
    # answers left before): one failure closes the class, then one probe
    # per window of 0.5 .. 4 s.
    assert len(during) <= ENTRIES + 30, len(during)
    assert gitlab.violations == []


def test_refused_outage_one_probe_per_window_then_a_spread_return(gitlab_factory, daemons):
    gitlab = gitlab_factory(long_poll=5)
    d, runners, base = start_fleet(gitlab, daemons)
    before = job_attempts(base)
    start = time.monotonic()
    gitlab.stop()                   # the held long polls are cut, nothing listens
    time.sleep(OUTAGE_S / 2)
    assert metric(base, CLASS_METRIC) == 1
    time.sleep(start + OUTAGE_S - time.monotonic())
    sent = job_attempts(base) - before
    gitlab.start(port=gitlab.port)
    back_at = time.monotonic()
    # The cut long polls are attempts too (one per entry, sent before);
    # after them, one probe per window, for all 100 entries together.
    assert 1 <= sent <= ENTRIES + 30, sent
    what = recover_and_check(gitlab, d, runners, base, back_at)
    assert "curl" in what
    assert gitlab.violations == []
