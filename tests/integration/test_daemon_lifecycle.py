"""`runner run`: how jobs end when something else ends them, and reports that are never lost.

GitLab cancels (graceful, after_script with CI_JOB_STATUS=canceled) or
aborts a job (protocol.md 9.6); the final PUT fails and is retried
(5.3); the daemon is killed with -9 while it reports or while a job runs,
and the journal finishes the job at the next start; SIGQUIT drains,
SIGTERM interrupts (10.4).  Every test ends with check_run().
"""
import os
import re
import signal
import time

import pytest

from gitlab_double import crc32_checksum
from daemon_helpers import (add_job, check_run, daemons, entry, final_puts,  # noqa: F401
                            is_final_put, job_requests, job_requests_of, new_token, pid_gone,
                            wait_until)

FAST_KEEPALIVE = {"RUNNER_KEEPALIVE_MS": "300"}
SLEEPER = 'sleep 30 & echo "sleep pid $!"; wait'


def sleep_pid(job, timeout=15):
    m = wait_until(lambda: re.search(r"sleep pid (\d+)", job.log_text), timeout,
                   f"job {job.id} to print its sleep's pid")
    pid = int(m.group(1))
    assert not pid_gone(pid)
    return pid


def accepted_finals(job):
    return [u for u in job.updates if u.get("state") in ("success", "failed")]


# ---------------------------------------------------------------------------
# 7. cancel and abort from GitLab
# ---------------------------------------------------------------------------

def test_cancel_runs_after_script_and_reports(gitlab, daemons):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")], asan=True, env=FAST_KEEPALIVE)
    job = add_job(gitlab, r, script=[SLEEPER],
                  after_script=['echo "after_script status=$CI_JOB_STATUS"'])
    d.start()
    pid = sleep_pid(job)
    t0 = time.monotonic()
    job.cancel()
    gitlab.wait_for_job(job, "canceled", timeout=15)
    took = time.monotonic() - t0
    assert took < 5, f"cancel took {took:.1f} s"

    log = job.log_text
    assert "WARNING: script canceled externally (UI, API)" in log
    assert "after_script status=canceled" in log
    assert job.final["state"] == "failed"
    # job_canceled is not a Rails reason: mapped to unknown_failure (protocol.md 5.6).
    assert job.final["failure_reason"] == "unknown_failure"
    assert len(accepted_finals(job)) == 1
    # The daemon's own line says what GitLab shows: canceled, not failed.
    d.wait_log(rf"job {job.id}: finished, canceled; GitLab has the report")
    wait_until(lambda: pid_gone(pid), 5, f"the canceled job's sleep ({pid}) to be gone")
    # The cancel came on a keep-alive: PUT state=running describing the log sent so far.
    touches = [q.json() for q in job_requests(gitlab, job)[1:]
               if q.method == "PUT" and q.json()["state"] == "running"]
    assert touches
    for t in touches:
        size = t["output"]["bytesize"]
        assert t["output"]["checksum"] == crc32_checksum(job.log[:size])

    # The daemon goes on: it asks again and runs the next job.
    after = time.monotonic()
    wait_until(lambda: [q for q in job_requests_of(gitlab, r.token) if q.time > after], 10,
               "a job request after the cancel")
    nxt = add_job(gitlab, r, script=["echo next job"])
    gitlab.wait_for_job(nxt, "success", timeout=15)
    assert d.stop() == 0
    check_run(gitlab, d, [job, nxt])


def test_abort_kills_the_job_without_after_script(gitlab, daemons, tmp_path):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")], asan=True, env=FAST_KEEPALIVE)
    marker = tmp_path / "after_script_ran"
    job = add_job(gitlab, r, script=[SLEEPER], after_script=[f"touch {marker}"])
    d.start()
    pid = sleep_pid(job)
    job.abort()
    wait_until(lambda: pid_gone(pid), 10, f"the aborted job's sleep ({pid}) to be gone")
    wait_until(lambda: any(q.response_status == 403 for q in job_requests(gitlab, job)), 10,
               "a 403 for the aborted job")
    d.wait_log(rf"job {job.id}: .*(finished|report)", timeout=10)
    seen = len(job_requests(gitlab, job))
    # A window to see the daemon stay silent about the job (nothing to poll for).
    time.sleep(1.5)
    assert len(job_requests(gitlab, job)) == seen, "the daemon still talks about the job"
    first_403 = next(i for i, q in enumerate(job_requests(gitlab, job))
                     if q.response_status == 403)
    assert seen - first_403 <= 2, [(q.method, q.response_status) for q in job_requests(gitlab, job)]
    assert not marker.exists(), "after_script ran after an abort"
    assert job.status == "canceled" and job.final is None
    assert d.running()
    nxt = add_job(gitlab, r, script=["echo next job"])
    gitlab.wait_for_job(nxt, "success", timeout=15)
    assert d.stop() == 0
    check_run(gitlab, d, [job, nxt])


# ---------------------------------------------------------------------------
# 9. the final PUT fails, then goes through
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("failures", [5, 7])
def test_final_put_503_then_200(gitlab, daemons, failures):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")], env={"RUNNER_FINAL_BACKOFF_MS": "200"})
    job = add_job(gitlab, r, script=["echo reporting"])
    gitlab.script("PUT", rf"^/api/v4/jobs/{job.id}$", status=503, times=failures,
                  predicate=is_final_put)
    d.start()
    gitlab.wait_for_job(job, "success", timeout=30)
    assert d.stop() == 0

    fp = final_puts(gitlab, job)
    assert [q.response_status for q in fp] == [503] * failures + [200]
    assert len(accepted_finals(job)) == 1 and job.final["state"] == "success"
    # The retry layer makes 5 attempts per call; the report's own backoff comes after.
    assert "final report not delivered" in d.stderr
    assert fp[5].time - fp[4].time >= 0.2
    assert len({q.body for q in fp}) == 1
    check_run(gitlab, d, [job])


def test_final_report_given_up_after_retry_limit(gitlab, daemons):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha", job_status_final_update_retry_limit=2)])
    job = add_job(gitlab, r, script=["echo nobody will hear"])
    gitlab.script("PUT", rf"^/api/v4/jobs/{job.id}$", status=503, times=None,
                  predicate=is_final_put)
    d.start()
    m = d.wait_log(rf"ERROR: job {job.id}: the final report .* could not be delivered to "
                   r"(\S+) after 2 attempts; last answer: (.*)", timeout=20)
    assert m.group(1) == gitlab.url and "503" in m.group(2)
    wait_until(lambda: d.journal_files() == [], 5, "the journal entry to be dropped")
    # 2 attempts of the report, 5 tries of the retry layer each.
    assert [q.response_status for q in final_puts(gitlab, job)] == [503] * 10
    assert job.status == "running" and job.final is None
    after = time.monotonic()
    wait_until(lambda: [q for q in job_requests_of(gitlab, r.token) if q.time > after], 5,
               "the daemon to keep polling")
    assert d.stop() == 0
    check_run(gitlab, d, [job])


# ---------------------------------------------------------------------------
# 10. kill -9, restart: the journal finishes the job
# ---------------------------------------------------------------------------

def test_kill9_during_final_report_delivers_once_after_restart(gitlab, daemons):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")], asan=True)
    job = add_job(gitlab, r, script=["echo almost done"])
    gitlab.script("PUT", rf"^/api/v4/jobs/{job.id}$", status=503, times=None,
                  predicate=is_final_put)
    d.start()
    wait_until(lambda: len(final_puts(gitlab, job)) >= 6, 20,
               "the final report to be retried")
    assert f"{job.id}.toml" in d.journal_files() and f"{job.id}.log" in d.journal_files()
    with open(f"{d.journal}/{job.id}.toml") as f:
        journal = f.read()
    assert 'progress = "finished"' in journal and 'state = "success"' in journal
    d.kill9()
    assert f"{job.id}.toml" in d.journal_files(), "the journal is gone after kill -9"
    assert job.status == "running" and job.final is None

    gitlab.clear_scripts()
    before = len(final_puts(gitlab, job))
    d.start()
    gitlab.wait_for_job(job, "success", timeout=20)
    wait_until(lambda: d.journal_files() == [], 10, "the journal to be emptied")
    d.wait_log(rf"job {job.id}: the report left by the last run was delivered")
    assert d.stop() == 0

    fp = final_puts(gitlab, job)
    assert [q.response_status for q in fp[before:]] == [200]
    # The journal goes first: no job request before the report is delivered.
    restarted = [q for q in job_requests_of(gitlab, r.token) if q.time > fp[before - 1].time]
    assert restarted and restarted[0].time > fp[-1].time
    assert sum(q.response_status == 200 for q in fp) == 1
    assert len(accepted_finals(job)) == 1 and job.final["state"] == "success"
    assert "almost done" in job.log_text
    check_run(gitlab, d, [job])


def test_kill9_while_job_runs_reports_system_failure_after_restart(gitlab, daemons, tmp_path):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")], asan=True)
    pidfile = tmp_path / "sleep.pid"
    job = add_job(gitlab, r, script=["echo started", f"sleep 30 & echo $! > {pidfile}; wait"])
    d.start()
    wait_until(lambda: "started" in job.log_text and pidfile.exists(), 15,
               "the job to run")
    d.kill9()
    pid = int(pidfile.read_text())
    try:
        d.start()
        gitlab.wait_for_job(job, ("success", "failed", "canceled"), timeout=20)
        wait_until(lambda: d.journal_files() == [], 10, "the journal to be emptied")
        assert d.stop() == 0
    finally:
        if not pid_gone(pid):
            os.kill(pid, signal.SIGKILL)
    assert job.status == "failed" and job.failure_reason == "runner_system_failure", job.report()
    assert len(accepted_finals(job)) == 1
    assert "started" in job.log_text
    check_run(gitlab, d, [job])


# ---------------------------------------------------------------------------
# 11. SIGQUIT: drain
# ---------------------------------------------------------------------------

def test_sigquit_drains_running_job(gitlab_factory, daemons):
    gitlab = gitlab_factory(long_poll=30)
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")], concurrent=2)
    job = add_job(gitlab, r, script=["echo started", "sleep 1.5", "echo finished"])
    d.start()
    wait_until(lambda: "started" in job.log_text, 15, "the job to start")
    # The other slot holds a long-polled request.
    wait_until(lambda: any(q.hold_outcome == "holding" for q in job_requests_of(gitlab, r.token)),
               10, "a held job request")
    t_sig = time.monotonic()
    d.send_signal(signal.SIGQUIT)
    d.wait_log("SIGQUIT")
    late = add_job(gitlab, r, script=["echo must not run"])
    rc = d.wait(15)
    exited = time.monotonic()
    d.assert_sanitizers_clean()
    assert rc == 0
    assert job.status == "success" and "finished" in job.log_text
    assert late.status == "pending"
    assert [q for q in job_requests_of(gitlab, r.token) if q.time > t_sig] == []
    fin = final_puts(gitlab, job)[-1]
    assert exited - fin.time < 2, "the daemon lingered after the last job"
    check_run(gitlab, d, [job])


# ---------------------------------------------------------------------------
# 12. SIGTERM: interrupt, still report
# ---------------------------------------------------------------------------

def test_sigterm_interrupts_and_reports(gitlab, daemons, tmp_path):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")], shutdown_timeout=10)
    marker = tmp_path / "after_script_ran"
    job = add_job(gitlab, r, script=[SLEEPER], after_script=[f"touch {marker}"])
    d.start()
    pid = sleep_pid(job)
    t0 = time.monotonic()
    d.send_signal(signal.SIGTERM)
    rc = d.wait(12)
    took = time.monotonic() - t0
    d.assert_sanitizers_clean()
    assert rc == 0, d.tail()
    assert took < 5, f"SIGTERM took {took:.1f} s"
    assert job.status == "failed" and job.failure_reason == "runner_interrupted", job.report()
    assert job.final["failure_reason"] == "runner_interrupted"
    assert not marker.exists(), "after_script ran on SIGTERM"
    wait_until(lambda: pid_gone(pid), 5, f"the interrupted job's sleep ({pid}) to be gone")
    assert d.journal_files() == []
    check_run(gitlab, d, [job])


def test_sigterm_shutdown_timeout_leaves_the_report_to_the_journal(gitlab, daemons):
    r = gitlab.add_runner(token=new_token())
    # Under ASan: what the jobs hold must be released before the client closes.
    d = daemons(gitlab, [entry(gitlab, r, "alpha")], shutdown_timeout=2, asan=True)
    job = add_job(gitlab, r, script=[SLEEPER])
    gitlab.script("PUT", rf"^/api/v4/jobs/{job.id}$", status=503, times=None,
                  predicate=is_final_put)
    d.start()
    sleep_pid(job)
    t0 = time.monotonic()
    d.send_signal(signal.SIGTERM)
    rc = d.wait(10)
    took = time.monotonic() - t0
    assert rc == 1
    assert 1.8 <= took < 4, f"shutdown_timeout 2 s, the runner took {took:.1f} s"
    assert "shutdown_timeout: 1 job is not done" in d.stderr
    assert "handles still open" not in d.stderr
    assert "LeakSanitizer" not in d.stderr and "AddressSanitizer" not in d.stderr
    assert f"{job.id}.toml" in d.journal_files()
    gitlab.clear_scripts()
    d.start()
    gitlab.wait_for_job(job, ("success", "failed"), timeout=20)
    wait_until(lambda: d.journal_files() == [], 10, "the journal to be emptied")
    assert d.stop() == 0
    assert job.failure_reason == "runner_interrupted", job.report()
    check_run(gitlab, d, [job])


def test_second_sigterm_leaves_at_once_and_journal_keeps_the_report(gitlab, daemons):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")], shutdown_timeout=30)
    job = add_job(gitlab, r, script=[SLEEPER])
    gitlab.script("PUT", rf"^/api/v4/jobs/{job.id}$", status=503, times=None,
                  predicate=is_final_put)
    d.start()
    pid = sleep_pid(job)
    d.send_signal(signal.SIGTERM)
    wait_until(lambda: final_puts(gitlab, job), 10, "the interrupted job's final PUT")
    assert d.running()
    t0 = time.monotonic()
    d.send_signal(signal.SIGTERM)
    rc = d.wait(5)
    took = time.monotonic() - t0
    assert rc != 0
    assert took < 1, f"the second SIGTERM took {took:.1f} s"
    assert f"{job.id}.toml" in d.journal_files()
    wait_until(lambda: pid_gone(pid), 5, "the job's sleep to be gone")

    # The next start delivers what the journal kept.
    gitlab.clear_scripts()
    d.start()
    gitlab.wait_for_job(job, ("success", "failed"), timeout=20)
    wait_until(lambda: d.journal_files() == [], 10, "the journal to be emptied")
    assert d.stop() == 0
    assert job.failure_reason == "runner_interrupted", job.report()
    assert len(accepted_finals(job)) == 1
    check_run(gitlab, d, [job])
