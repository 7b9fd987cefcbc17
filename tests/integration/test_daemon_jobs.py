"""`runner run`: one job from request to final report, against the GitLab double.

The happy path on the wire (protocol.md 1.6, 4.2-4.4, 5.1-5.4, 6.1), the
log pipeline as GitLab receives it (masking across writes, output_limit,
6.4-6.5), the answers that make the log sender go back (416, 202, 412:
5.3, 6.2), the job timeout (9.4) and the daemon's memory under a job
printing 200 MB.  Every test ends with check_run(): no protocol
violation, every final PUT describes exactly the log GitLab holds, and no
token in the daemon's stderr or in any PATCH body.
"""
import os
import re
import signal
import subprocess
import time

import pytest

from daemon_helpers import (ROOT, add_job, assert_last_update_echoed, check_run, content_range, daemons,  # noqa: F401
                            entry, final_puts, is_final_put, job_requests, job_requests_of, new_token, patches,
                            pid_gone, wait_until)
from gitlab_double import crc32_checksum

# Every key of info.features (protocol.md 4.2): always sent, as booleans.
FEATURE_KEYS = (
    "variables", "image", "services", "artifacts", "cache", "fallback_cache_keys", "shared",
    "upload_multiple_artifacts", "upload_raw_artifacts", "session", "terminal", "refspecs",
    "masking", "proxy", "raw_variables", "artifacts_exclude", "multi_build_steps",
    "trace_reset", "trace_checksum", "trace_size", "vault_secrets", "cancelable",
    "return_exit_code", "service_variables", "service_multiple_aliases",
    "image_executor_opts", "service_executor_opts", "cancel_gracefully",
    "native_steps_integration", "two_phase_job_commit", "job_inputs")


def claimed_features():
    """The features runner/info.c's job_features() sets to true."""
    with open(os.path.join(ROOT, "runner", "info.c")) as f:
        src = f.read()
    body = re.search(r"\njob_features\([^)]*\)\n\{(.*?)\n\}", src, re.S).group(1)
    return set(re.findall(r"f->(\w+) = true;", body))


def assert_contiguous(gitlab, job):
    """The PATCHes of a job start at 0, follow each other, and cover the log GitLab holds."""
    ps = patches(gitlab, job)
    assert ps, "no PATCH for the job"
    at = 0
    for p in ps:
        start, end = content_range(p)
        assert start == at, f"PATCH Content-Range {start}-{end}, expected to start at {at}"
        assert end == start + len(p.body) - 1
        assert p.headers["Content-Type"].startswith("text/plain")
        assert p.query == "debug_trace=false"
        assert p.response_status == 202
        at = end + 1
    assert b"".join(p.body for p in ps) == job.log


# ---------------------------------------------------------------------------
# 1. the happy path, request by request
# ---------------------------------------------------------------------------

def test_happy_path_exact_requests(gitlab, daemons):
    r = gitlab.add_runner(token=new_token(), id=11)
    d = daemons(gitlab, [entry(gitlab, r, "alpha")], asan=True)
    job = add_job(gitlab, r, id=701, script=["echo first line", "echo \"greeting: $GREETING\"",
                                            "echo last line"],
                  variables={"GREETING": "hello from the pipeline"})
    d.start()
    gitlab.wait_for_job(job, "success", timeout=30)
    # A few more job requests, to see X-GitLab-Last-Update echoed.
    wait_until(lambda: len(gitlab.requests_for("POST", "/jobs/request$")) >= 4, 15,
               "job requests after the job")
    assert d.stop(signal.SIGQUIT) == 0

    reqs = gitlab.requests
    first = reqs[0]
    assert (first.method, first.path, first.response_status) == ("POST", "/api/v4/jobs/request", 201)
    assert first.response_body and b'"id":701' in first.response_body

    # The job's own requests: ack, PATCHes, final PUT, and nothing else.
    mine = job_requests(gitlab, job)
    kinds = []
    for q in mine:
        if q.method == "PATCH":
            kinds.append("PATCH")
        else:
            kinds.append("PUT " + q.json()["state"])
    assert kinds[0] == "PUT running" and kinds[-1] == "PUT success", kinds
    assert set(kinds[1:-1]) == {"PATCH"}, kinds
    assert all(q.response_status in (200, 202) for q in mine)
    assert mine[0].time > first.time

    ack = mine[0].json()
    assert ack["token"] == job.token and mine[0].headers["Job-Token"] == job.token
    assert ack["output"] == {}
    assert "failure_reason" not in ack and "exit_code" not in ack
    for q in mine:
        assert "Runner-Token" not in q.headers

    assert_contiguous(gitlab, job)
    fin = mine[-1].json()
    assert fin["output"] == {"checksum": crc32_checksum(job.log), "bytesize": len(job.log)}
    assert "failure_reason" not in fin and "exit_code" not in fin
    assert job.status == "success" and job.final["state"] == "success"

    log = job.log_text
    for text in ("first line", "greeting: hello from the pipeline", "last line",
                 "Job succeeded"):
        assert text in log

    # The job request body (protocol.md 4.2).
    jr = gitlab.requests_for("POST", "/jobs/request$")
    claimed = claimed_features()
    assert claimed >= {"variables", "trace_checksum", "two_phase_job_commit", "masking"}
    for q in jr:
        body = q.json()
        assert body["token"] == r.token and q.headers["Runner-Token"] == r.token
        assert "Job-Token" not in q.headers
        feats = body["info"]["features"]
        assert set(feats) == set(FEATURE_KEYS)
        assert all(isinstance(v, bool) for v in feats.values())
        assert {k for k, v in feats.items() if v} == claimed
        assert body["info"]["executor"] == "shell" and body["info"]["shell"] == "bash"
        assert re.match(r"^[sr]_[0-9a-zA-Z]{12}$", body["system_id"])
    # X-GitLab-Last-Update is echoed as last_update on the next request.
    assert "last_update" not in jr[0].json()
    assert assert_last_update_echoed(jr) >= 2
    check_run(gitlab, d, [job])


def test_failed_job_reports_exit_code(gitlab, daemons):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")])
    job = add_job(gitlab, r, script=["echo about to fail", "exit 3", "echo never"],
                  after_script=['echo "after_script status=$CI_JOB_STATUS"'])
    d.start()
    gitlab.wait_for_job(job, ("success", "failed"), timeout=20)
    assert d.stop() == 0
    assert job.status == "failed" and job.failure_reason == "script_failure"
    assert job.final["exit_code"] == 3 and job.exit_code == 3
    log = job.log_text
    assert "after_script status=failed" in log and "never" not in log
    assert "ERROR: Job failed: exit code 3" in log
    check_run(gitlab, d, [job])


# ---------------------------------------------------------------------------
# 2. masking
# ---------------------------------------------------------------------------

SECRET = "Zq8xK3vLm9PwR2tY"


@pytest.mark.parametrize("timestamps", [True, False], ids=["timestamps", "no-timestamps"])
def test_masked_secret_never_sent(gitlab, daemons, timestamps):
    r = gitlab.add_runner(token=new_token())
    extra = {} if timestamps else {"feature_flags": {"FF_TIMESTAMPS": False}}
    d = daemons(gitlab, [entry(gitlab, r, "alpha", **extra)],
                env={"RUNNER_TRACE_INTERVAL_MS": "100"})
    script = [
        'echo "whole: $SECRET"',
        # Three separate writes of one secret, with PATCHes in between.
        "printf 'pieces: %s' \"${SECRET:0:6}\"; sleep 0.4; printf '%s' \"${SECRET:6:5}\"; "
        "sleep 0.4; printf '%s\\n' \"${SECRET:11}\"",
        # A secret split by a line on stderr.
        "printf 'split: %s' \"${SECRET:0:8}\"; sleep 0.4; echo 'a line on stderr' >&2; "
        "sleep 0.4; printf '%s\\n' \"${SECRET:8}\"",
        "echo done",
    ]
    job = add_job(gitlab, r, script=script,
                  variables={"SECRET": {"value": SECRET, "masked": True}})
    d.start()
    gitlab.wait_for_job(job, "success", timeout=30)
    assert d.stop() == 0

    ps = patches(gitlab, job)
    assert len(ps) >= 4, "the pieces were not sent in separate PATCHes"
    pieces = {SECRET[i:i + 5] for i in range(len(SECRET) - 4)}
    for p in ps:
        body = p.body.decode("utf-8", "replace")
        for piece in pieces:
            assert piece not in body, f"{piece!r} of the secret in a PATCH: {body!r}"
    log = job.log_text
    for piece in pieces:
        assert piece not in log
    assert log.count("[MASKED]") == 3, log
    assert "whole: [MASKED]" in log and "pieces: [MASKED]" in log
    assert "a line on stderr" in log and "done" in log
    if timestamps:
        assert re.search(r"01O split: \[MASKED\]\n", log), log
        assert re.search(r"01E a line on stderr\n", log), log
    else:
        assert "split: a line on stderr\n[MASKED]\n" in log, log
    check_run(gitlab, d, [job])


# ---------------------------------------------------------------------------
# 3. output_limit
# ---------------------------------------------------------------------------

def test_output_limit_cuts_the_log_with_the_notice(gitlab, daemons):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha", output_limit=1)])
    job = add_job(gitlab, r, script=['for i in $(seq 1 500); do echo "line $i of the output"; done',
                                     "echo still running after the limit"])
    d.start()
    gitlab.wait_for_job(job, ("success", "failed"), timeout=30)
    assert d.stop() == 0

    notice = ("\n\x1b[33;1mJob's log exceeded limit of 1024 bytes.\nJob execution will "
              "continue but no more output will be collected.\x1b[0;m\n")
    log = job.log_text
    assert job.status == "success", job.report()
    assert log.endswith(notice), repr(log[-300:])
    assert log.count("Job's log exceeded limit") == 1
    assert len(job.log) <= 1024 + len(notice.encode())
    assert "Running with runner" in log.split("\n")[0]
    assert "line 500 " not in log and "still running after the limit" not in log, log
    assert job.final["output"]["bytesize"] == len(job.log)
    check_run(gitlab, d, [job])


# ---------------------------------------------------------------------------
# 4. 416: GitLab's copy ends elsewhere
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("lost", [True, False], ids=["gitlab-lost-bytes", "stale-range"])
def test_416_resends_from_the_server_offset(gitlab, daemons, lost):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")])
    job = add_job(gitlab, r, script=["echo first", "sleep 0.5", "echo second", "sleep 0.5",
                                     "echo third"])

    def second_patch(req):
        # The first PATCH got through; the next one is answered 416 "Range: 0-5".
        if req.headers.get("Content-Range", "0-").startswith("0-"):
            return False
        if lost:
            del job.trace[5:]          # GitLab really holds only 5 bytes
        return True

    rule = gitlab.script("PATCH", rf"^/api/v4/jobs/{job.id}/trace$", status=416,
                         headers={"Range": "0-5"}, predicate=second_patch)
    d.start()
    gitlab.wait_for_job(job, "success", timeout=30)
    assert d.stop() == 0
    assert rule.used == 1

    ps = patches(gitlab, job)
    i = next(k for k, p in enumerate(ps) if p.response_status == 416)
    assert content_range(ps[i + 1])[0] == 5, "the PATCH after the 416 does not start at 5"
    if not lost:
        # GitLab answers that one 416 with its real size; the runner goes on from there.
        assert ps[i + 1].response_status == 416
        real = int(ps[i + 1].response_headers["Range"].split("-")[1])
        assert content_range(ps[i + 2])[0] == real
    for text in ("first", "second", "third", "Job succeeded"):
        assert text in job.log_text
    assert job.final["output"]["bytesize"] == len(job.log)
    check_run(gitlab, d, [job])


# ---------------------------------------------------------------------------
# 5. 202: accepted, not yet completed
# ---------------------------------------------------------------------------

def test_202_final_put_repeated_at_the_interval(gitlab, daemons):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")])
    job = add_job(gitlab, r, script=["echo hi"], accept_after=3)

    def interval_from_now_on(req):
        # GitLab asks for 1 s only in its 202s: the wait must be the server's, not the
        # runner's own interval (200 ms here).
        if is_final_put(req):
            job.update_interval = 1
            return True
        return False

    gitlab.script("PUT", rf"^/api/v4/jobs/{job.id}$", predicate=interval_from_now_on)
    d.start()
    gitlab.wait_for_job(job, "success", timeout=30)
    assert d.stop() == 0

    fp = final_puts(gitlab, job)
    assert [q.response_status for q in fp] == [202, 202, 202, 200]
    gaps = [b.time - a.time for a, b in zip(fp, fp[1:])]
    assert all(0.8 <= g <= 2.0 for g in gaps), gaps
    print(f"202 loop: gaps between final PUTs {[round(g, 2) for g in gaps]} s")
    # Nothing new to send: no PATCH between the final PUTs.
    between = [q for q in job_requests(gitlab, job) if fp[0].time < q.time < fp[-1].time
               and q.method == "PATCH"]
    assert between == []
    assert len({q.body for q in fp}) == 1, "the repeated final PUTs differ"
    check_run(gitlab, d, [job])


# ---------------------------------------------------------------------------
# 6. 412: trace validation failed
# ---------------------------------------------------------------------------

def test_412_resends_the_whole_log(gitlab, daemons):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")])
    job = add_job(gitlab, r, script=["seq 1 3000", "echo end of the log"],
                  trace_validation_fails=True)
    d.start()
    gitlab.wait_for_job(job, "success", timeout=30)
    assert d.stop() == 0

    fp = final_puts(gitlab, job)
    assert [q.response_status for q in fp] == [412, 200]
    assert job.trace_resets == 1
    after = [q for q in patches(gitlab, job) if fp[0].time < q.time < fp[1].time]
    assert after, "no PATCH between the 412 and the next final PUT"
    assert content_range(after[0])[0] == 0
    assert b"".join(q.body for q in after) == job.log
    assert "end of the log" in job.log_text and "01O 2999\n" in job.log_text
    assert fp[0].body == fp[1].body
    check_run(gitlab, d, [job])


# ---------------------------------------------------------------------------
# 8. timeout
# ---------------------------------------------------------------------------

def test_job_timeout(gitlab, daemons, tmp_path):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")])
    marker = tmp_path / "after_script_ran"
    pidfile = tmp_path / "sleep.pid"
    job = add_job(gitlab, r, timeout=2,
                  script=[f"sleep 30 & echo $! > {pidfile}; wait"],
                  after_script=[f"touch {marker}"])
    d.start()
    gitlab.wait_for_job(job, ("running",), timeout=10)
    t0 = time.monotonic()
    gitlab.wait_for_job(job, ("success", "failed", "canceled"), timeout=15)
    took = time.monotonic() - t0
    assert d.stop() == 0

    assert job.status == "failed" and job.failure_reason == "job_execution_timeout", job.report()
    assert took < 6, f"the 2 s timeout took {took:.1f} s to end the job"
    assert not marker.exists(), "after_script ran after the job timeout"
    assert "execution took longer than 2 seconds" in job.log_text
    assert "Running after_script" not in job.log_text
    pid = int(pidfile.read_text())
    wait_until(lambda: pid_gone(pid), 5, f"the job's sleep ({pid}) to be gone")
    check_run(gitlab, d, [job])


# ---------------------------------------------------------------------------
# 15. 200 MB of output: memory stays bounded
# ---------------------------------------------------------------------------

RSS_BOUND_KIB = 40 * 1024


def test_200mb_of_output_keeps_rss_bounded(gitlab, daemons):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")])
    # pipefail (as gitlab-runner) would fail the job on yes's SIGPIPE: not what is tested.
    job = add_job(gitlab, r, script=["set +o pipefail; yes 0123456789abcdef | head -c 200000000",
                                     "echo printed everything"])
    d.start()
    t0 = time.monotonic()
    samples = []
    while job.status not in ("success", "failed", "canceled"):
        rss = d.rss_kib()
        if rss is not None:
            samples.append(rss)
        assert time.monotonic() - t0 < 60, "the 200 MB job takes too long"
        time.sleep(0.1)
    took = time.monotonic() - t0
    assert d.stop() == 0
    print(f"200 MB job: {took:.1f} s, max RSS {max(samples) / 1024:.1f} MiB over "
          f"{len(samples)} samples")
    assert job.status == "success", job.report()
    assert max(samples) < RSS_BOUND_KIB, f"RSS reached {max(samples)} KiB"
    limit = 4096 * 1024
    assert limit <= len(job.log) <= limit + 200
    assert_contiguous(gitlab, job)
    assert max(len(p.body) for p in patches(gitlab, job)) <= 1024 * 1024
    assert "Job's log exceeded limit of 4194304 bytes" in job.log_text
    check_run(gitlab, d, [job])


def test_log_is_synced_off_the_loop_once_per_backlog(gitlab, daemons, tmp_path):
    """The fdatasync before a PATCH runs on libuv's thread pool, and one covers a backlog.

    strace follows the daemon's threads: the main thread (the event loop)
    may sync the log once, when the job ends (the journal then names a
    whole log); every other sync is another thread's, and a job printing
    3 MiB at once, sent in several PATCHes, needs fewer syncs than PATCHes.
    """
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")])
    d.start()
    wait_until(lambda: job_requests_of(gitlab, r.token), 10, "the daemon polls")
    out = tmp_path / "strace.out"
    tracer = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=fdatasync", "-o", str(out),
                               "-p", str(d.pid)], stderr=subprocess.PIPE)
    try:
        wait_until(lambda: out.exists(), 10, "strace attaches")
        time.sleep(0.5)  # strace writes its file before it has attached every thread
        job = add_job(gitlab, r, script=["head -c 3000000 /dev/zero | tr '\\0' x", "sleep 1"])
        wait_until(lambda: job.status in ("success", "failed"), 60, "the job ends")
        assert d.stop() == 0
    finally:
        tracer.wait(10)
    assert job.status == "success", job.report()
    calls = [line.split()[0] for line in out.read_text().splitlines() if "fdatasync(" in line]
    on_loop = calls.count(str(d.pid))
    off_loop = len(calls) - on_loop
    n_patches = len(patches(gitlab, job))
    assert n_patches >= 3, f"{n_patches} PATCHes for 3 MB"
    assert on_loop <= 1, f"the event loop called fdatasync {on_loop} times"
    assert 1 <= off_loop < n_patches, f"{off_loop} syncs on the pool for {n_patches} PATCHes"
    assert_contiguous(gitlab, job)
    check_run(gitlab, d, [job])
