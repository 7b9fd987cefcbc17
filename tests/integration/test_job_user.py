"""`runner run --user U`: every stage runs as U through su, as gitlab-runner does it."""
import os
import pwd
import shutil
import tempfile

import pytest

from daemon_helpers import (add_job, check_run, daemons, entry, new_token, pid_gone,  # noqa: F401
                            wait_until)


@pytest.fixture
def nobody():
    """The user 'nobody' and a world-readable base directory (pytest's tmp_path is 0700)."""
    if os.geteuid() != 0 or shutil.which("su") is None:
        pytest.skip("needs root and su")
    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("needs a user 'nobody'")
    base = tempfile.mkdtemp(prefix="runner-user-")
    os.chmod(base, 0o755)
    try:
        yield user, base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_stages_run_as_the_user_and_own_the_checkout(gitlab, daemons, nobody):
    user, base = nobody
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "user", builds_dir=os.path.join(base, "builds"))])
    job = add_job(gitlab, r, script=['echo "WHO=$(id -un)"', "touch made-by-the-job",
                                     'echo "DIR=$(pwd)"'],
                  after_script=['echo "AFTER-WHO=$(id -un)"'])
    d.start(["run", "-c", d.config, "-d", d.dir, "--user", "nobody"])
    gitlab.wait_for_job(job, ("success", "failed"), timeout=60)
    assert d.stop() == 0
    log = job.log_text
    assert job.status == "success", log
    assert "WHO=nobody" in log and "AFTER-WHO=nobody" in log
    where = [line.split("DIR=", 1)[1] for line in log.splitlines()
             if "DIR=" in line and "$ " not in line][0]
    assert os.stat(os.path.join(where, "made-by-the-job")).st_uid == user.pw_uid
    check_run(gitlab, d, [job])


def test_a_cancel_reaches_what_the_users_script_started(gitlab, daemons, nobody):
    # su -c runs the user's shell in a session of its own; the cancel must reach it anyway.
    _, base = nobody
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "user", builds_dir=os.path.join(base, "builds"))],
                env={"RUNNER_KEEPALIVE_MS": "300"})
    job = add_job(gitlab, r, script=['sleep 1000 & echo "BG=$!"', "sleep 1000"])
    d.start(["run", "-c", d.config, "-d", d.dir, "--user", "nobody"])
    wait_until(lambda: "BG=" in job.log_text.replace("$ sleep", ""), 30, "the job to start")
    pid = int([line.split("BG=", 1)[1] for line in job.log_text.splitlines()
               if "BG=" in line and "$ " not in line][0])
    job.cancel()
    gitlab.wait_for_job(job, ("canceled",), timeout=60)
    assert d.stop() == 0
    wait_until(lambda: pid_gone(pid), 15, "the user's background sleep to be killed")
    check_run(gitlab, d, [job])


def test_the_users_cache_and_artifacts(gitlab, daemons, nobody):
    # The helpers run as the user too: the cache directory the daemon makes is theirs.
    user, base = nobody
    r = gitlab.add_runner(token=new_token())
    cache_dir = os.path.join(base, "cache")
    d = daemons(gitlab, [entry(gitlab, r, "user", builds_dir=os.path.join(base, "builds"),
                               cache_dir=cache_dir)])
    job = add_job(gitlab, r, script=["mkdir -p keep out", "echo k > keep/k", "echo o > out/o"],
                  cache=[{"key": "k", "paths": ["keep/"]}],
                  artifacts=[{"paths": ["out/"]}])
    d.start(["run", "-c", d.config, "-d", d.dir, "--user", "nobody"])
    gitlab.wait_for_job(job, ("success", "failed"), timeout=60)
    assert d.stop() == 0
    assert job.status == "success", job.log_text
    archive = os.path.join(cache_dir, "group", "project", "k", "cache.zip")
    assert os.stat(archive).st_uid == user.pw_uid
    assert os.stat(cache_dir).st_uid == user.pw_uid
    assert gitlab.artifact(job) is not None
    check_run(gitlab, d, [job])
