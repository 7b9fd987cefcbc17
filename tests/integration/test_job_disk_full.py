"""A full disk under the job log (issue 14, item 4).

The builds and state directories (journal, job logs) live on a 2 MB tmpfs.
A job printing 10 MB fills it; a job that needs no disk runs on a tmpfs
already full.  Either way GitLab must hold a log that says what was lost
(the ERROR line comes from a reserve the log keeps in memory), the job is
failed with runner_system_failure, the final report's checksum and bytesize
describe exactly the bytes GitLab acknowledged (the double checks them
strictly: check_run), and the same daemon runs the next job normally once
there is space again.  The journal cannot be written on a full disk either:
the daemon says a crash would lose the report, and delivers it all the same
(the journal is a net for crashes, not a step on the way to GitLab).
"""
import errno
import os
import re
import signal
import subprocess

import pytest

from daemon_helpers import (Daemon, add_job, check_run, content_range, entry, is_final_put, new_token, patches,
                            wait_until)

DISK_ERROR = "ERROR: the job log could not be written to disk: No space left on device"


@pytest.fixture
def small_disk(gitlab, tmp_path):
    """(mountpoint, make): a 2 MB tmpfs and make(entries) -> a Daemon whose directory it is.

    The daemons are killed before the tmpfs is unmounted.
    """
    mnt = tmp_path / "disk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(mnt)],
                   check=True)
    made = []

    def make(entries, **kwargs):
        d = Daemon(mnt, gitlab, entries, **kwargs)
        # Its own log must not need the full disk: that is where the test reads it.
        d.stderr_path = str(tmp_path / "daemon.stderr")
        made.append(d)
        return d

    try:
        yield mnt, make
    finally:
        for d in made:
            d.close()
        subprocess.run(["umount", str(mnt)], check=True)


def fill(path):
    """Write path until the file system is full; returns the bytes written."""
    chunk = b"f" * 65536
    n = 0
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                n += f.write(chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
                break
        while True:     # the last pages, smaller than a chunk
            try:
                n += f.write(b"f" * 512)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
                break
    return n


def assert_log_lost_to_disk(gitlab, job):
    """Failed as a system failure, the ERROR in GitLab's copy, the PATCHes cover it exactly."""
    assert job.status == "failed", gitlab.summary()
    assert job.failure_reason == "runner_system_failure"
    # The notice ends the log: nothing is taken after it.
    assert job.log_text.endswith(DISK_ERROR + "\x1b[0;m\n"), job.log_text[-300:]
    at = 0
    for p in patches(gitlab, job):
        if p.response_status != 202:
            continue
        start, end = content_range(p)
        assert start == at
        at = end + 1
    assert at == len(job.trace)
    out = job.final["output"]
    assert out["bytesize"] == len(job.trace)
    assert out["checksum"] == job.checksum


def test_job_filling_the_disk_fails_and_the_next_runs(gitlab, small_disk):
    mnt, make = small_disk
    r = gitlab.add_runner(token=new_token())
    d = make([entry(gitlab, r, "disk", builds_dir=str(mnt / "builds"))], asan=True)
    big = add_job(gitlab, r, script=["head -c 10000000 /dev/zero | tr '\\0' x", "echo after"])
    d.start()
    gitlab.wait_for_job(big, ("success", "failed"), timeout=90)
    assert_log_lost_to_disk(gitlab, big)
    # The file's 2 MB at most, then what the write buffer held (32 KiB) and the notice.
    assert len(big.trace) < 2 * 1024 * 1024 + 33 * 1024
    assert b"echo after" not in big.trace
    d.wait_log(r"job %d: .*could not be written to disk.*No space left on device" % big.id)

    # Its log file went with its report: the same daemon has space again.
    nxt = add_job(gitlab, r, script=["echo the next job"])
    gitlab.wait_for_job(nxt, ("success", "failed"), timeout=60)
    assert nxt.status == "success", gitlab.summary()
    assert "the next job" in nxt.log_text and nxt.log_text.endswith("Job succeeded\x1b[0;m\n")
    assert DISK_ERROR not in nxt.log_text
    assert d.stop() == 0
    check_run(gitlab, d, [big, nxt])


def test_job_on_a_full_disk_is_not_reported_success(gitlab, small_disk):
    mnt, make = small_disk
    r = gitlab.add_runner(token=new_token())
    d = make([entry(gitlab, r, "disk", builds_dir=str(mnt / "builds"))], asan=True)
    d.start()
    wait_until(lambda: gitlab.requests_for("POST", "/jobs/request$"), 30, "a job request")
    filler = mnt / "filler"
    assert fill(filler) > 0

    job = add_job(gitlab, r, script=["echo needs no disk"])
    gitlab.wait_for_job(job, ("success", "failed"), timeout=60)
    assert_log_lost_to_disk(gitlab, job)
    # Nor can the journal be kept: the daemon says so, and reports all the same.
    d.wait_log(r"ERROR: job %d: cannot write \S+/journal/%d\.toml: No space left on device: "
               r"a crash now would lose this job's report" % (job.id, job.id))
    assert not os.path.exists(mnt / "journal" / f"{job.id}.toml")
    # Nothing reached the disk, yet GitLab has the log from memory.
    assert "Running with runner" in job.log_text

    os.unlink(filler)
    nxt = add_job(gitlab, r, script=["echo space again"])
    gitlab.wait_for_job(nxt, ("success", "failed"), timeout=60)
    assert nxt.status == "success", gitlab.summary()
    assert "space again" in nxt.log_text and DISK_ERROR not in nxt.log_text
    assert d.stop() == 0
    check_run(gitlab, d, [job, nxt])


def test_report_left_on_a_full_disk_is_said_to_be_lost(gitlab, small_disk):
    """The daemon leaves (shutdown_timeout) with a report no journal could keep: it says so."""
    mnt, make = small_disk
    r = gitlab.add_runner(token=new_token())
    d = make([entry(gitlab, r, "disk", builds_dir=str(mnt / "builds"))], shutdown_timeout=2,
             asan=True)
    d.start()
    wait_until(lambda: gitlab.requests_for("POST", "/jobs/request$"), 30, "a job request")
    fill(mnt / "filler")
    job = add_job(gitlab, r, script=["sleep 30"])
    gitlab.script("PUT", rf"^/api/v4/jobs/{job.id}$", status=503, times=None,
                  predicate=is_final_put)
    d.wait_log(r"job %d: cannot write the log to \S+: No space left on device" % job.id)
    d.send_signal(signal.SIGTERM)
    assert d.wait(20) == 1
    d.assert_sanitizers_clean()
    assert re.search(r"ERROR: job %d: the final report is not delivered yet, and it could not "
                     r"be written to \S+/journal/%d\.toml: it is lost" % (job.id, job.id),
                     d.stderr), d.tail()
    assert "stays in" not in d.stderr
    # Nothing is left for a next start: not even the log, which no entry names.
    assert d.journal_files() == [], d.journal_files()
    gitlab.clear_scripts()


def test_report_left_with_the_start_entry_is_sent_by_the_next_start(gitlab, small_disk):
    """The entry the job's start wrote stays; the next start reports the job failed from it."""
    mnt, make = small_disk
    r = gitlab.add_runner(token=new_token())
    d = make([entry(gitlab, r, "disk", builds_dir=str(mnt / "builds"))], shutdown_timeout=2,
             asan=True)
    job = add_job(gitlab, r, script=["sleep 30"])
    gitlab.script("PUT", rf"^/api/v4/jobs/{job.id}$", status=503, times=None,
                  predicate=is_final_put)
    d.start()
    wait_until(lambda: f"{job.id}.toml" in d.journal_files(), 30, "the job's journal entry")
    wait_until(lambda: patches(gitlab, job), 30, "the first PATCH")
    filler = mnt / "filler"
    fill(filler)
    d.send_signal(signal.SIGTERM)
    assert d.wait(20) == 1
    d.assert_sanitizers_clean()
    assert re.search(r"ERROR: job %d: the final report is not delivered yet, and it could not "
                     r"be written to \S+/journal/%d\.toml: the next start reports the job failed "
                     r"\(runner_system_failure\)" % (job.id, job.id), d.stderr), d.tail()
    assert f"{job.id}.toml" in d.journal_files()

    os.unlink(filler)
    gitlab.clear_scripts()
    d.start()
    gitlab.wait_for_job(job, ("success", "failed"), timeout=30)
    wait_until(lambda: d.journal_files() == [], 10, "the journal to be emptied")
    assert d.stop() == 0
    assert job.failure_reason == "runner_system_failure", job.report()
    check_run(gitlab, d, [job])
