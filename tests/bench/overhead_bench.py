"""overhead: what the runner adds to a job `echo hello`, over bash itself.

The figure is the wall time from the moment the double has written the
201 of the job request (the runner has the job) until it has written its
answer to the final PUT (GitLab has the job's end), minus the time bash
takes to run the very same stage scripts directly.  The double records
both moments (Request.answered) and answers at once (long polling on, so
the runner holds a request open when the job is added).

The stage scripts are the runner's own, not rebuilt: a first job runs
with a `bash` wrapper first in the daemon's PATH (the shell executor
looks the shell up in the stage's PATH) that copies each stage's stdin
to a file before exec'ing the real bash.  That job is not timed.  After
each timed job the captured scripts are run again with `/usr/bin/bash -l`,
stdin from the file, the daemon's environment and working directory, one
after the other, stdout and stderr to pipes, as the shell executor does.
Both sides thus pay the same login shell start and /etc/profile; the
difference is the runner's own work: HTTP round trips, the job's
preparation, the log path and the reports.

HOME is an empty directory for the daemon (and so for the replay): this
machine's ~/.profile runs `pyenv init`, whose rehash waits on a lock
shared with every other shell on the machine, so it would add a noisy
and large profile time to both sides ("excluding profile time").

Shells per job: a separate run under `strace -f -ff -e trace=execve`
counts the bash processes started (`bash -l` are the stage shells) and
all programs exec'd for one job.  The limit is `bash -c true`, spawned
and waited for from Python, in the same run.
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import time

from common import RUNNER, daemon_env, figure, stop_daemon

ID = "overhead"
TITLE = "job `echo hello`: runner time over running its stage scripts with bash"
JOBS = int(os.environ.get("BENCH_OVERHEAD_JOBS", "20"))
BASH = shutil.which("bash") or "/bin/bash"


def _env(work, path_prefix=None):
    env = daemon_env(work)
    if path_prefix:
        env["PATH"] = path_prefix + ":" + env.get("PATH", "/usr/bin:/bin")
    return env


def _start(argv, work, env, tag):
    return subprocess.Popen(argv, env=env, cwd=work, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(work, f"stderr.{tag}"), "w"))


def _run_job(gitlab, r, timeout=60):
    from daemon_helpers import without_sources
    from gitlab_double import job_payload

    job = gitlab.add_job(job_payload(script=["echo hello"], variables=without_sources()),
                         runner=r)
    gitlab.wait_for_job(job, ("success", "failed"), timeout=timeout)
    rep = job.report()
    if rep["status"] != "success":
        raise RuntimeError(f"job {job.id} ended {rep['status']}: {rep['log'][-500:]}")
    return job


def _pickup_to_final(gitlab, job):
    """Seconds from the 201 handing out job to the answer of its final PUT."""
    import json

    got = None
    for q in gitlab.requests_for("POST", r"/jobs/request$"):
        if q.response_status == 201 and json.loads(q.response_body).get("id") == job.id:
            got = q.answered
    final = None
    for q in gitlab.requests_for("PUT", rf"/jobs/{job.id}$"):
        if q.response_status == 200 and q.json().get("state") in ("success", "failed"):
            final = q.answered
    if got is None or final is None:
        raise RuntimeError(f"job {job.id}: no 201 or final PUT answer recorded")
    # The double's last write may still be running when the job turns final.
    return final - got


def _wait_answered(gitlab, job, timeout=5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        puts = [q for q in gitlab.requests_for("PUT", rf"/jobs/{job.id}$")
                if q.response_status == 200 and q.json().get("state") == "success"]
        if puts and puts[-1].answered is not None:
            return
        time.sleep(0.005)
    raise RuntimeError(f"job {job.id}: the final PUT's answer was not written")


def _wrapper(d, cap):
    os.makedirs(d)
    os.makedirs(cap)
    path = os.path.join(d, "bash")
    with open(path, "w") as f:
        # The file name sorts by start time; the stage's arguments go beside it.
        f.write("#!/bin/sh\n"
                f'f="{cap}/stage.$(date +%s%N).$$"\n'
                'printf "%s\\n" "$@" > "$f.argv"\n'
                'cat > "$f"\n'
                f'exec {BASH} "$@" < "$f"\n')
    os.chmod(path, 0o755)


def _replay(scripts, env, work):
    t = time.monotonic()
    for s, argv in scripts:
        with open(s, "rb") as stdin:
            p = subprocess.run([BASH] + argv, stdin=stdin, env=env, cwd=work,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0:
            raise RuntimeError(f"replaying {os.path.basename(s)} exited {p.returncode}: "
                               f"{p.stderr[-300:]!r}")
    return time.monotonic() - t


def _bash_true(runs=20):
    out = []
    for _ in range(runs):
        t = time.monotonic()
        subprocess.run([BASH, "-c", "true"], check=True)
        out.append((time.monotonic() - t) * 1e3)
    return out


def _strace_counts(work, cfg, env, gitlab, r, holding):
    """(bash -l processes, bash processes, programs exec'd) for one job under strace."""
    strace = shutil.which("strace")
    if strace is None:
        return None
    d = os.path.join(work, "strace")
    os.makedirs(d)
    t = time.monotonic()
    p = _start([strace, "-f", "-ff", "-qq", "-e", "trace=execve", "-o",
                os.path.join(d, "t"), RUNNER, "run", "-c", cfg, "-d", work],
               work, env, "strace")
    try:
        # Long polling: the daemon holds a request once it has started.
        gitlab.wait_for(holding(t), timeout=30)
        _run_job(gitlab, r, timeout=120)
    finally:
        # strace detaches on SIGQUIT and leaves the daemon running: signal the daemon.
        try:
            with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
                kids = [int(x) for x in f.read().split()]
        except OSError:
            kids = []
        for kid in kids:
            os.kill(kid, signal.SIGQUIT)
        stop_daemon(p, 15)
    login = shells = progs = 0
    ok = re.compile(r'^execve\("([^"]*)", \[(.*?)\].*\) = 0$', re.M)
    for f in glob.glob(os.path.join(d, "t.*")):
        with open(f, errors="replace") as fh:
            execs = ok.findall(fh.read())
        for path, argv in execs:
            if os.path.basename(path) == "strace" or path == RUNNER:
                continue
            progs += 1
            if os.path.basename(path) == "bash":
                shells += 1
                login += argv.startswith('"bash", "-l"')
    return login, shells, progs


def run(work):
    from daemon_helpers import config_text, entry, new_token
    from gitlab_double import GitLabDouble

    wrap, cap = os.path.join(work, "wrap"), os.path.join(work, "cap")
    _wrapper(wrap, cap)
    gitlab = GitLabDouble(long_poll=10).start()
    try:
        r = gitlab.add_runner(token=new_token())
        cfg = os.path.join(work, "config.toml")
        with open(cfg, "w") as f:
            f.write(config_text([entry(gitlab, r, "overhead",
                                       builds_dir=os.path.join(work, "builds"))],
                                check_interval=1))
        env = _env(work)

        def holding(since):
            """A job request sent after since is held: the daemon is idle, waiting."""
            return lambda: any(q.hold_outcome == "holding" and q.time > since
                               for q in gitlab.requests_for("POST", r"/jobs/request$"))

        # 1. One job with the wrapper: the stage scripts, as the runner wrote them.
        t = time.monotonic()
        p = _start([RUNNER, "run", "-c", cfg, "-d", work], work, _env(work, wrap), "capture")
        try:
            gitlab.wait_for(holding(t), timeout=30)
            _run_job(gitlab, r, timeout=120)
        finally:
            stop_daemon(p, 15)
        scripts = []
        for s in sorted(f for f in glob.glob(os.path.join(cap, "stage.*"))
                        if not f.endswith(".argv")):
            with open(s + ".argv") as fh:
                scripts.append((s, fh.read().split("\n")[:-1]))
        if not scripts:
            raise RuntimeError("the bash wrapper saw no stage")
        stages = len(scripts)

        # 2. The timed jobs, each followed by the replay of the captured scripts.
        t = time.monotonic()
        p = _start([RUNNER, "run", "-c", cfg, "-d", work], work, env, "timed")
        walls, replays = [], []
        try:
            for _ in range(JOBS):
                gitlab.wait_for(holding(t), timeout=30)
                job = _run_job(gitlab, r)
                _wait_answered(gitlab, job)
                walls.append(_pickup_to_final(gitlab, job) * 1e3)
                replays.append(_replay(scripts, env, work) * 1e3)
                t = time.monotonic()
        finally:
            stop_daemon(p, 15)
        limit = _bash_true()

        # 3. Shells and programs per job, under strace (a run of its own: strace is slow).
        counts = _strace_counts(work, cfg, env, gitlab, r, holding)
        violations = gitlab.violations
    finally:
        gitlab.stop()

    over = [w - b for w, b in zip(walls, replays)]
    note = (f"{JOBS} jobs one after another; HOME is an empty directory (no ~/.profile: "
            "its pyenv rehash waits on a machine-wide lock); both sides run /etc/profile")
    if violations:
        note += "; double saw protocol violations: " + "; ".join(violations[:3])
    rows = [
        figure("201 received → final PUT answered, minus bash running the same stage "
               "scripts", over, "ms", anchor="one login shell per stage + round trips",
               goal="≤ 10 ms", limit=limit, limit_what="bash -c true, spawned and waited",
               note=note),
        figure("201 received → final PUT answered", walls, "ms"),
        figure(f"the {stages} stage scripts run directly with bash -l", replays, "ms",
               limit=[x * stages for x in limit], limit_what=f"{stages} × bash -c true"),
        figure("stage shells per job (bash wrapper)", stages, "",
               anchor="one login shell per stage"),
    ]
    if counts is not None:
        login, shells, progs = counts
        rows += [
            figure("login shells (bash -l) per job, strace", login, "",
                   anchor="one login shell per stage"),
            figure("bash processes per job, strace", shells, ""),
            figure("programs exec'd per job, strace", progs, "",
                   note="every successful execve under the daemon but the daemon's own, "
                        "/etc/profile's included"),
        ]
    return rows
