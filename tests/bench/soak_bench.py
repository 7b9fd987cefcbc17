"""soak: many short jobs through one daemon, with cancels and aborts mixed in.

One `runner run` (concurrent = 8, long polling on) takes N jobs (the
issue's 10 000 by default, BENCH_SOAK_JOBS to change it).  Most run `echo hi`;
every CANCEL_EVERY-th job instead prints a line every 0.2 s until GitLab
cancels it (job.cancel(): Job-Status canceling, the runner stops the
script and reports) and as many others are aborted (job.abort(): 403 with
Job-Status canceled on the next PATCH).  A feeder keeps QUEUED jobs
pending, so the daemon never waits for work.

The daemon's RssAnon, VmRSS and open fds (/proc/<pid>/fd) are read twice
at rest (every job finished, the daemon's job request held by the
double): after the first 10% of the jobs (the warm-up) and at the end.
Growth per job is the difference over the jobs in between.

Then VALGRIND_JOBS jobs (100, the same mix) run through a daemon under
valgrind --leak-check=full, stopped with SIGQUIT; the LEAK SUMMARY and
ERROR SUMMARY are parsed from its log.
"""
import os
import re
import subprocess
import time

from common import RUNNER, daemon_env, figure, proc_status, stop_daemon, wait_for

ID = "soak"
TITLE = "many short jobs with cancels and aborts: RSS, fds, valgrind"
CONCURRENT = 8
QUEUED = 16
CANCEL_EVERY = 50           # job i % 50 == 10 is canceled, == 35 aborted
VALGRIND_JOBS = 100
VALGRIND_ERROR_EXIT = 99
LONG_POLL = 5


def _kind(i):
    return {10: "cancel", 35: "abort"}.get(i % CANCEL_EVERY, "short")


def _payload(kind):
    from daemon_helpers import without_sources
    from gitlab_double import job_payload

    if kind == "short":
        script = ["echo hi"]
    else:
        # Output keeps the log sender talking to GitLab, which is how it
        # learns of the cancel or abort; 60 s is far past when that comes.
        script = ["for i in $(seq 300); do echo tick $i; sleep 0.2; done"]
    return job_payload(script=script, variables=without_sources({}))


def _fd_kinds(pid):
    """What the open fds are, counted: "socket 3, pipe 4, /dev/null 1"."""
    kinds = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        kind = target.split(":")[0] if ":" in target else target
        kinds[kind] = kinds.get(kind, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))


def _fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError):
        return 0


class _Soak:
    """The double, one daemon (argv), and the feeder that keeps it busy."""

    def __init__(self, work, argv_prefix=(), env=None):
        from daemon_helpers import config_text, entry, new_token
        from gitlab_double import GitLabDouble

        self.gitlab = GitLabDouble(long_poll=LONG_POLL).start()
        self.runner = self.gitlab.add_runner(token=new_token())
        self.cfg = os.path.join(work, "config.toml")
        with open(self.cfg, "w") as f:
            f.write(config_text([entry(self.gitlab, self.runner, "soak",
                                       builds_dir=os.path.join(work, "builds"))],
                                concurrent=CONCURRENT, check_interval=3, shutdown_timeout=60))
        self.jobs = []          # (kind, Job)
        self.open = []          # indexes of jobs not yet final
        self.told = set()       # cancel/abort already done
        run_env = daemon_env(work)
        run_env.update(env or {})
        self.stderr = open(os.path.join(work, "stderr"), "w")
        self.proc = subprocess.Popen(list(argv_prefix) + [RUNNER, "run", "-c", self.cfg,
                                                          "-d", work],
                                     env=run_env, stdin=subprocess.DEVNULL,
                                     stdout=self.stderr, stderr=self.stderr)

    def _step(self):
        """Cancel/abort what is due, forget what is final; returns pending count."""
        still, pending = [], 0
        for i in self.open:
            kind, job = self.jobs[i]
            st = job.status
            if st in ("success", "failed", "canceled"):
                continue
            still.append(i)
            if st == "pending":
                pending += 1
            elif kind != "short" and i not in self.told and st == "running" and job.trace:
                (job.cancel if kind == "cancel" else job.abort)()
                self.told.add(i)
        self.open = still
        return pending

    def feed(self, upto, timeout):
        """Add jobs until upto exist, then wait until every one is final."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"runner run exited {self.proc.returncode}")
            pending = self._step()
            while len(self.jobs) < upto and pending < QUEUED:
                i = len(self.jobs)
                kind = _kind(i)
                job = self.gitlab.add_job(_payload(kind), runner=self.runner,
                                          update_interval=1 if kind != "short" else 3)
                self.jobs.append((kind, job))
                self.open.append(i)
                pending += 1
            if len(self.jobs) >= upto and not self.open:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(self.open)} of {len(self.jobs)} jobs still not final "
                                   f"after {timeout} s")
            time.sleep(0.005)

    def at_rest(self):
        """Wait until the daemon holds a job request and nothing else; then sample."""
        def resting():
            reqs = self.gitlab.requests_for("POST", r"/jobs/request$")
            return reqs and reqs[-1].hold_outcome == "holding"
        wait_for(resting, 30, "the daemon at rest (a job request held)", interval=0.05)
        time.sleep(1.0)
        s = proc_status(self.proc.pid, "VmRSS", "RssAnon")
        s["fds"] = _fds(self.proc.pid)
        s["fd_kinds"] = _fd_kinds(self.proc.pid)
        return s

    def unexpected(self):
        """Jobs that did not end as their kind should: text for a note."""
        bad = []
        for kind, job in self.jobs:
            want = "success" if kind == "short" else "canceled"
            if job.status != want or (kind == "short" and not job.checksum_ok):
                bad.append(f"job {job.id} ({kind}) {job.status} checksum_ok={job.checksum_ok}")
        return bad

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            stop_daemon(self.proc, timeout)
        self.stderr.close()
        self.gitlab.stop()
        return self.proc.returncode


def _plain(work, n):
    warm = max(CANCEL_EVERY, n // 10)
    s = _Soak(work)
    try:
        s.feed(warm, 120)
        base = s.at_rest()
        t0 = time.monotonic()
        s.feed(n, 60 + n)
        elapsed = time.monotonic() - t0
        end = s.at_rest()
        bad = s.unexpected()
        violations = s.gitlab.violations
        kinds = [k for k, _ in s.jobs]
    finally:
        s.stop()
    per = n - warm
    tag = f"{n} jobs"
    mix = (f"{kinds.count('cancel')} canceled and {kinds.count('abort')} aborted among them; "
           f"at rest after {warm} (baseline) and after {n}")
    if n < 10000:
        mix += "; not the issue's 10 000 (BENCH_SOAK_JOBS=10000)"
    rows = [
        figure(f"RssAnon growth per job, {tag}", (end["RssAnon"] - base["RssAnon"]) * 1024 / per,
               "B", anchor="~4 KB leaked per job", goal="< 100 B", note=mix),
        figure(f"VmRSS growth per job, {tag}", (end["VmRSS"] - base["VmRSS"]) * 1024 / per,
               "B", anchor="~4 KB leaked per job", goal="< 100 B"),
        figure(f"open fds at the end minus baseline, {tag}", end["fds"] - base["fds"], "fds",
               goal="0", note=f"baseline {base['fds']} fds ({base['fd_kinds']}), "
                              f"end ({end['fd_kinds']})"),
        figure(f"jobs per second, concurrent = {CONCURRENT}, {tag}", per / elapsed, "jobs/s"),
        figure(f"jobs not ending as they should, {tag}", len(bad), "jobs", goal="0",
               note="; ".join((bad[:3] + violations[:3])) or None),
    ]
    return rows


_LEAK_RE = {k: re.compile(rf"{k} lost: ([\d,]+) bytes in ([\d,]+) blocks")
            for k in ("definitely", "indirectly", "possibly")}


def _valgrind(work, n):
    log = os.path.join(work, "valgrind.log")
    prefix = ["valgrind", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
              f"--error-exitcode={VALGRIND_ERROR_EXIT}", f"--log-file={log}"]
    s = _Soak(work, prefix)
    try:
        # valgrind's start takes seconds; the first job request says it is up.
        wait_for(lambda: s.gitlab.requests_for("POST", r"/jobs/request$"), 60,
                 "the daemon under valgrind to ask for a job", interval=0.1)
        t0 = time.monotonic()
        s.feed(n, 600)
        elapsed = time.monotonic() - t0
        bad = s.unexpected()
    finally:
        rc = s.stop(120)
    with open(log) as f:
        text = f.read()
    m = re.search(r"ERROR SUMMARY: ([\d,]+) errors", text)
    if m is None:
        raise RuntimeError(f"no ERROR SUMMARY in valgrind's log (exit {rc})")
    errors = int(m.group(1).replace(",", ""))
    lost = {}
    for k, rx in _LEAK_RE.items():
        mm = rx.search(text)
        lost[k] = int(mm.group(1).replace(",", "")) if mm else 0
    reach = re.search(r"still reachable: ([\d,]+) bytes", text)
    tag = f"{n} jobs under valgrind"
    note = (f"exit {rc}; {elapsed:.0f} s for the jobs; possibly lost {lost['possibly']} B, "
            f"still reachable {reach.group(1) if reach else 0} B")
    if bad:
        note += "; " + "; ".join(bad[:3])
    return [
        figure(f"valgrind errors, {tag}", errors, "errors", goal="0", note=note),
        figure(f"definitely lost, {tag}", lost["definitely"], "B", goal="0"),
        figure(f"indirectly lost, {tag}", lost["indirectly"], "B", goal="0"),
    ]


def run(work):
    n = int(os.environ.get("BENCH_SOAK_JOBS", "10000"))
    nv = int(os.environ.get("BENCH_SOAK_VALGRIND_JOBS", str(VALGRIND_JOBS)))
    plain = os.path.join(work, "plain")
    vg = os.path.join(work, "valgrind")
    os.makedirs(plain)
    os.makedirs(vg)
    return _plain(plain, n) + _valgrind(vg, nv)
