"""`runner run`: asking for jobs (protocol.md 4.3, 4.4, 4.8, 10.3, 10.4).

Config reload by SIGHUP and by the file changing, three entries with
long polling on, a runner GitLab refuses (unhealthy), `limit` and
`concurrent`, `run-single --max-builds`, and a config with an entry this
build cannot run.  Every test ends with check_run().
"""
import os
import re
import signal
import subprocess
import time

from daemon_helpers import (add_job, assert_last_update_echoed, check_run, daemons, entry, final_puts,  # noqa: F401
                            job_requests_of, new_token, wait_until)
from daemon_helpers import RUNNER


def picked_at(gitlab, job):
    """Arrival time of the job request whose 201 carried this job."""
    for q in gitlab.requests_for("POST", r"^/api/v4/jobs/request$"):
        if q.response_status == 201 and f'"id":{job.id},'.encode() in (q.response_body or b""):
            return q.time
    return None


def accepted_at(gitlab, job):
    """Arrival time of the final PUT GitLab accepted (200)."""
    return next(q.time for q in final_puts(gitlab, job) if q.response_status == 200)


# ---------------------------------------------------------------------------
# 13. reload
# ---------------------------------------------------------------------------

def test_sighup_reload_adds_an_entry(gitlab_factory, daemons):
    # Long polling on: alpha has a request held while the config changes under it.
    gitlab = gitlab_factory(long_poll=2)
    a = gitlab.add_runner(token=new_token())
    b = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, a, "alpha")], concurrent=4, asan=True)
    job_a = add_job(gitlab, a, script=["echo alpha starts", "sleep 3", "echo alpha ends"])
    d.start()
    wait_until(lambda: "alpha starts" in job_a.log_text, 15, "alpha's job to start")
    wait_until(lambda: any(q.hold_outcome == "holding" for q in job_requests_of(gitlab, a.token)),
               5, "alpha's held request")
    assert job_requests_of(gitlab, b.token) == []

    d.write_config([entry(gitlab, a, "alpha"), entry(gitlab, b, "beta")])
    t_hup = time.monotonic()
    d.send_signal(signal.SIGHUP)
    d.wait_log(r"config reloaded \(SIGHUP\)")
    wait_until(lambda: job_requests_of(gitlab, b.token), 5, "beta to poll")
    job_b = add_job(gitlab, b, script=["echo beta runs"])
    gitlab.wait_for_job(job_b, "success", timeout=15)
    gitlab.wait_for_job(job_a, "success", timeout=15)
    assert picked_at(gitlab, job_b) < accepted_at(gitlab, job_a), \
        "beta's job did not run beside alpha's"
    wait_until(lambda: [q for q in job_requests_of(gitlab, a.token) if q.time > t_hup], 8,
               "alpha to poll after the reload")
    assert d.stop() == 0

    # alpha's job went on as if nothing happened.
    assert "alpha ends" in job_a.log_text and "Job succeeded" in job_a.log_text
    assert len(final_puts(gitlab, job_a)) == 1
    assert len(re.findall(r"runner alpha \(.*\): polling", d.stderr)) == 1
    check_run(gitlab, d, [job_a, job_b])


def test_config_file_change_reloads_without_signal(gitlab, daemons):
    a = gitlab.add_runner(token=new_token())
    c = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, a, "alpha")], concurrent=2,
                env={"RUNNER_CONFIG_CHECK_MS": "200"})
    d.start()
    wait_until(lambda: job_requests_of(gitlab, a.token), 5, "alpha to poll")
    d.write_config([entry(gitlab, a, "alpha"), entry(gitlab, c, "gamma")])
    d.wait_log(r"config reloaded \(the file changed\)")
    wait_until(lambda: job_requests_of(gitlab, c.token), 5, "gamma to poll")
    job_c = add_job(gitlab, c, script=["echo gamma runs"])
    gitlab.wait_for_job(job_c, "success", timeout=15)

    # Dropping alpha from the file stops its requests.
    d.write_config([entry(gitlab, c, "gamma")])
    wait_until(lambda: d.stderr.count("config reloaded (the file changed)") >= 2, 5,
               "the second reload")
    t = time.monotonic() + 0.3      # a request already in flight may still land
    seen_c = len(job_requests_of(gitlab, c.token))
    wait_until(lambda: len(job_requests_of(gitlab, c.token)) >= seen_c + 2, 5,
               "gamma to keep polling")
    assert [q for q in job_requests_of(gitlab, a.token) if q.time > t] == []
    assert d.stop() == 0
    check_run(gitlab, d, [job_c])


# ---------------------------------------------------------------------------
# 14. long polling: one entry's hold never delays another
# ---------------------------------------------------------------------------

def test_long_poll_hold_never_delays_another_entry(gitlab_factory, daemons):
    gitlab = gitlab_factory(long_poll=30)
    rs = [gitlab.add_runner(token=new_token()) for _ in range(3)]
    d = daemons(gitlab, [entry(gitlab, r, n) for r, n in zip(rs, ("alpha", "beta", "gamma"))],
                concurrent=3)
    d.start()

    def holding(r):
        return [q for q in job_requests_of(gitlab, r.token) if q.hold_outcome == "holding"]

    wait_until(lambda: all(holding(r) for r in rs), 10, "every entry to have a held request")
    held_a = holding(rs[0])[0]
    t0 = time.monotonic()
    job = add_job(gitlab, rs[2], script=["echo gamma runs a job"])
    gitlab.wait_for_job(job, ("running", "success"), timeout=5)
    took = picked_at(gitlab, job) - t0
    print(f"long poll: gamma's job picked up {took:.2f} s after it was queued "
          f"(check_interval 1 s)")
    assert took < 2.0, f"gamma's job waited {took:.2f} s"
    assert held_a.hold_outcome == "holding", "alpha's hold ended: gamma's job waited on it?"
    gitlab.wait_for_job(job, "success", timeout=10)
    t = time.monotonic()
    assert d.stop() == 0
    assert time.monotonic() - t < 3, "SIGQUIT waited for the long polls"
    for r in rs:
        assert assert_last_update_echoed(job_requests_of(gitlab, r.token)) >= 1
    check_run(gitlab, d, [job])


def test_job_released_from_a_hold_is_asked_for_at_once(gitlab_factory, daemons):
    # Workhorse's 204 on a queue change means "ask again now": waiting
    # check_interval (3 s here) would add it to every pickup (protocol.md 4.4).
    gitlab = gitlab_factory(long_poll=30)
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")], check_interval=3)
    d.start()
    wait_until(lambda: any(q.hold_outcome == "holding" for q in job_requests_of(gitlab, r.token)),
               10, "a held request")
    t0 = time.monotonic()
    job = add_job(gitlab, r, script=["echo picked up"])
    gitlab.wait_for_job(job, ("running", "success"), timeout=5)
    took = picked_at(gitlab, job) - t0
    print(f"long poll, check_interval 3: picked up {took * 1000:.1f} ms after it was queued")
    assert took < 1.0, f"the job waited {took:.2f} s after the hold ended"
    gitlab.wait_for_job(job, "success", timeout=10)
    assert d.stop() == 0
    check_run(gitlab, d, [job])


def test_next_job_after_a_job_is_picked_up_at_once(gitlab_factory, daemons):
    # After a job, the next request goes to Rails (the queue value moved)
    # and gets its 204 with a new value; with long polling on
    # (Gitlab-Ci-Builds-Polling) the request after that is held, so it
    # goes at once instead of after check_interval (3 s here).
    gitlab = gitlab_factory(long_poll=30)
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")], check_interval=3)
    first = add_job(gitlab, r, script=["echo first"])
    d.start()
    gitlab.wait_for_job(first, "success", timeout=10)
    wait_until(lambda: any(q.hold_outcome == "holding" for q in job_requests_of(gitlab, r.token)),
               2.0, "a held request within 2 s of the job's end (check_interval is 3 s)")
    t0 = time.monotonic()
    second = add_job(gitlab, r, script=["echo second"])
    gitlab.wait_for_job(second, ("running", "success"), timeout=5)
    assert picked_at(gitlab, second) - t0 < 1.0
    gitlab.wait_for_job(second, "success", timeout=10)
    assert d.stop() == 0
    # Rails' quick 204s did not become a loop.
    reqs = job_requests_of(gitlab, r.token)
    assert len(reqs) <= 8, [(q.response_status, q.hold_outcome) for q in reqs]
    check_run(gitlab, d, [first, second])


def test_unheld_rails_204s_with_long_polling_do_not_make_a_loop(gitlab_factory, daemons):
    # A server that says it long-polls but answers every request at once
    # (Rails' 204 with a fresh value each time): two quick re-asks, then
    # check_interval (1 s).
    gitlab = gitlab_factory(long_poll=30)
    r = gitlab.add_runner(token=new_token())
    gitlab.script("POST", r"^/api/v4/jobs/request$", times=None, status=204,
                  headers={"X-GitLab-Last-Update": "changes-every-time",
                           "Gitlab-Ci-Builds-Polling": "yes"})
    d = daemons(gitlab, [entry(gitlab, r, "alpha")])
    d.start()
    time.sleep(4.0)
    assert d.stop() == 0
    n = len(job_requests_of(gitlab, r.token))
    assert 3 <= n <= 8, f"{n} job requests in 4 s"


def test_unheld_workhorse_204s_do_not_make_a_loop(gitlab, daemons):
    # A proxy answering 204 without X-GitLab-Last-Update at once looks like
    # Workhorse ending holds: two quick re-asks, then check_interval (1 s).
    r = gitlab.add_runner(token=new_token())
    gitlab.script("POST", r"^/api/v4/jobs/request$", times=None, status=204)
    d = daemons(gitlab, [entry(gitlab, r, "alpha")])
    d.start()
    time.sleep(4.0)
    assert d.stop() == 0
    n = len(job_requests_of(gitlab, r.token))
    print(f"unheld Workhorse 204s: {n} job requests in 4 s, check_interval 1 s")
    assert 3 <= n <= 8, f"{n} job requests in 4 s"


# ---------------------------------------------------------------------------
# 16. unhealthy
# ---------------------------------------------------------------------------

def test_unhealthy_runner_stops_asking_for_a_while(gitlab, daemons):
    unknown = new_token()
    d = daemons(gitlab, [entry(gitlab, unknown, "ghost", unhealthy_requests_limit=2,
                               unhealthy_interval="2s")])
    d.start()
    wait_until(lambda: len(job_requests_of(gitlab, unknown)) >= 4, 12, "four job requests")
    d.wait_log(r"runner ghost \(.*\): 2 job requests in a row failed.*not asking for jobs "
               r"for 2 s")
    wait_until(lambda: d.stderr.count("in a row failed") >= 2, 5, "the second error line")
    assert d.stop() == 0

    reqs = job_requests_of(gitlab, unknown)
    assert all(q.response_status == 403 for q in reqs)
    gaps = [b.time - a.time for a, b in zip(reqs, reqs[1:])]
    print(f"unhealthy: gaps between requests {[round(g, 2) for g in gaps]} s")
    assert 0.8 <= gaps[0] <= 1.8, gaps             # check_interval
    assert 1.8 <= gaps[1] <= 3.2, gaps             # unhealthy_interval
    assert 0.8 <= gaps[2] <= 1.8, gaps             # asking again
    # Once after requests 1-2, once after 3-4: each names the runner, at error level.
    err = [ln for ln in d.stderr.splitlines() if "in a row failed" in ln]
    assert len(err) == 2 and all(ln.startswith("ERROR: runner ghost ") for ln in err), err
    check_run(gitlab, d)


# ---------------------------------------------------------------------------
# 17. limit and concurrent
# ---------------------------------------------------------------------------

def assert_one_after_the_other(gitlab, j1, j2):
    first, second = sorted((j1, j2), key=lambda j: picked_at(gitlab, j))
    assert picked_at(gitlab, second) > accepted_at(gitlab, first), \
        "the second job was taken before the first one's final report"


def test_limit_one_runs_jobs_one_at_a_time(gitlab, daemons):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha", limit=1)], concurrent=4)
    j1 = add_job(gitlab, r, script=["sleep 0.5"])
    j2 = add_job(gitlab, r, script=["sleep 0.5"])
    d.start()
    gitlab.wait_for_job(j1, "success", timeout=15)
    gitlab.wait_for_job(j2, "success", timeout=15)
    assert d.stop() == 0
    assert_one_after_the_other(gitlab, j1, j2)
    check_run(gitlab, d, [j1, j2])


def test_concurrent_one_across_two_entries(gitlab, daemons):
    a = gitlab.add_runner(token=new_token())
    b = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, a, "alpha"), entry(gitlab, b, "beta")], concurrent=1)
    ja = add_job(gitlab, a, script=["sleep 0.5"])
    jb = add_job(gitlab, b, script=["sleep 0.5"])
    d.start()
    gitlab.wait_for_job(ja, "success", timeout=15)
    gitlab.wait_for_job(jb, "success", timeout=15)
    assert d.stop() == 0
    assert_one_after_the_other(gitlab, ja, jb)
    check_run(gitlab, d, [ja, jb])
    # Fewer slots than entries: said once, with the way out (gitlab-runner's
    # "worker starvation" warning).
    assert d.stderr.count("concurrent = 1 is less than the 2 [[runners]] entries") == 1, \
        d.stderr
    assert "set concurrent to 2 or more" in d.stderr


def test_enough_slots_no_starvation_warning(gitlab, daemons):
    a = gitlab.add_runner(token=new_token())
    b = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, a, "alpha"), entry(gitlab, b, "beta")], concurrent=2)
    d.start()
    wait_until(lambda: len(job_requests_of(gitlab, b.token)) >= 1, 5, "beta to poll")
    assert d.stop() == 0
    assert "is less than the" not in d.stderr, d.stderr


# ---------------------------------------------------------------------------
# 18. run-single --max-builds
# ---------------------------------------------------------------------------

def test_run_single_max_builds(gitlab, daemons):
    r = gitlab.add_runner(token=new_token())
    jobs = [add_job(gitlab, r, script=[f"echo job {i}"]) for i in range(3)]
    d = daemons(gitlab)
    d.secrets.add(r.token)
    d.start(args=["run-single", "--url", gitlab.url, "--token", r.token, "--executor", "shell",
                  "--max-builds", "2"])
    rc = d.wait(30)
    d.assert_sanitizers_clean()
    assert rc == 0, d.tail()
    assert [j.status for j in jobs] == ["success", "success", "pending"]
    assert len(gitlab.requests_for("POST", r"^/api/v4/jobs/request$")) == 2
    assert d.journal_files() == []
    check_run(gitlab, d, jobs)


# ---------------------------------------------------------------------------
# 19. a bad entry does not stop the good one
# ---------------------------------------------------------------------------

def test_bad_entry_is_named_and_skipped(gitlab, daemons):
    good = gitlab.add_runner(token=new_token())
    bad = new_token()
    d = daemons(gitlab, [entry(gitlab, bad, "kubish", executor="kubernetes"),
                         entry(gitlab, good, "good-one")])
    job = add_job(gitlab, good, script=["echo fine"])
    d.start()
    gitlab.wait_for_job(job, "success", timeout=15)
    wait_until(lambda: len(job_requests_of(gitlab, good.token)) >= 2, 5, "good-one to poll")
    assert d.stop() == 0
    assert re.search(r'kubish.*skipped.*kubernetes', d.stderr), d.stderr
    assert job_requests_of(gitlab, bad) == []
    check_run(gitlab, d, [job])


def test_run_before_register_waits_for_the_config(gitlab, daemons):
    """A service starts before `register` writes config.toml: no runners, then the file's."""
    a = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, a, "alpha")], asan=True,
                env={"RUNNER_CONFIG_CHECK_MS": "200"})
    os.unlink(d.config)
    d.start()
    d.wait_log(r"config\.toml does not exist yet: no runners until `runner register` writes it")
    time.sleep(0.5)
    assert d.running(), d.tail()
    assert job_requests_of(gitlab, a.token) == []
    d.write_config()
    d.wait_log(r"config reloaded \(the file changed\)")
    job = add_job(gitlab, a, script=["echo registered later"])
    gitlab.wait_for_job(job, "success", timeout=15)
    assert d.stop() == 0
    check_run(gitlab, d, [job])


def test_run_with_a_config_in_a_missing_directory_creates_nothing(tmp_path):
    """`run -c` naming a directory that does not exist (a typo, another account's
    home not made yet) leaves the file system as it was: no state directory, no
    journal, until there is a report to keep where the state is configured."""
    home = tmp_path / "home"
    home.mkdir()
    config = home / "someone" / "config.toml"
    p = subprocess.Popen([RUNNER, "run", "-c", str(config)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in p.stdout:
            lines.append(line)
            if "waiting for a config" in line:
                break
        assert any("does not exist yet" in line for line in lines), "".join(lines)
    finally:
        p.terminate()
        out = p.communicate(timeout=30)[0]
    assert p.returncode == 0, out
    assert list(home.iterdir()) == [], "".join(lines) + out
