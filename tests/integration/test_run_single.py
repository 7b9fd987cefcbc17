"""`runner run-single` with gitlab-runner's options (commands/single.go and the
common.RunnerConfig flags it embeds): --wait-timeout, -c/-r, --shutdown-timeout,
the entry's flags (--description, --builds-dir, --cache-dir, --env, the scripts,
--feature-flags) and their environment variables.
"""
import os
import re
import subprocess
import time

from daemon_helpers import (add_job, check_run, daemons, entry, new_token,  # noqa: F401
                            without_sources)
from daemon_helpers import RUNNER


def single(d, gitlab, r, *more):
    d.secrets.add(r.token)
    return d.start(args=["run-single", "--url", gitlab.url, "--token", r.token] + list(more))


def test_wait_timeout_exits_when_no_job_came(gitlab, daemons):
    # single.go checkFinishedConditions: idle longer than --wait-timeout -> exit 0.
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab)
    t0 = time.monotonic()
    single(d, gitlab, r, "--wait-timeout", "1")
    rc = d.wait(20)
    d.assert_sanitizers_clean()
    assert rc == 0, d.tail()
    assert time.monotonic() - t0 >= 1
    assert "This runner has not received a job in 1 seconds, so now exiting" in d.stderr
    check_run(gitlab, d)


def test_wait_timeout_counts_from_the_last_job(gitlab, daemons):
    r = gitlab.add_runner(token=new_token())
    job = add_job(gitlab, r, variables=without_sources(), script=["sleep 2", "echo done"])
    d = daemons(gitlab)
    single(d, gitlab, r, "--wait-timeout", "1")
    rc = d.wait(30)
    assert rc == 0, d.tail()
    # The 2 s job did not count as idle time: it ran to the end.
    assert job.status == "success", job.report()
    check_run(gitlab, d, [job])


def test_runner_flag_takes_the_named_entry_of_the_config(gitlab, daemons):
    a = gitlab.add_runner(token=new_token())
    b = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, a, "alpha"), entry(gitlab, b, "beta")])
    job_a = add_job(gitlab, a, variables=without_sources(), script=["echo a"])
    job_b = add_job(gitlab, b, variables=without_sources(), script=["echo b"])
    d.start(args=["run-single", "-c", d.config, "-r", "beta", "--max-builds", "1"])
    rc = d.wait(30)
    assert rc == 0, d.tail()
    assert job_b.status == "success" and job_a.status == "pending"
    assert "on beta " in job_b.log_text
    check_run(gitlab, d, [job_b])


def test_runner_flag_with_an_unknown_name_fails(gitlab, daemons):
    a = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, a, "alpha")])
    d.start(args=["run-single", "--config", d.config, "--runner", "nope"])
    assert d.wait(10) == 1
    assert "could not find a runner with the name 'nope'" in d.stderr


def test_entry_flags_reach_the_job(gitlab, daemons, tmp_path):
    r = gitlab.add_runner(token=new_token())
    builds, cache = tmp_path / "b", tmp_path / "c"
    job = add_job(gitlab, r, variables=without_sources(),
                  script=['echo "pwd=$PWD"', 'echo "one=$ONE two=$TWO"'])
    d = daemons(gitlab)
    single(d, gitlab, r, "--description", "single-one", "--builds-dir", str(builds),
           "--cache-dir", str(cache), "--env", "ONE=1", "--env", "TWO=2",
           "--pre-build-script", "echo pre-build-ran", "--feature-flags", "FF_TIMESTAMPS:false",
           "--max-builds", "1")
    assert d.wait(30) == 0, d.tail()
    text = job.log_text
    assert job.status == "success", job.report()
    assert "on single-one " in text
    assert re.search(r"pwd=" + re.escape(str(builds)) + "/", text), text
    assert "one=1 two=2" in text
    assert "pre-build-ran" in text
    check_run(gitlab, d, [job])


def test_entry_flags_from_the_environment(gitlab, daemons, tmp_path):
    # The RunnerConfig tags' env: names, as gitlab-runner reads them.
    r = gitlab.add_runner(token=new_token())
    builds = tmp_path / "envb"
    job = add_job(gitlab, r, variables=without_sources(), script=['echo "pwd=$PWD x=$X"'])
    d = daemons(gitlab, env={"CI_SERVER_URL": gitlab.url, "CI_SERVER_TOKEN": r.token,
                             "RUNNER_NAME": "from-env", "RUNNER_BUILDS_DIR": str(builds),
                             "RUNNER_ENV": "X=y", "RUNNER_EXECUTOR": "shell"})
    d.secrets.add(r.token)
    d.start(args=["run-single", "--max-builds", "1"])
    assert d.wait(30) == 0, d.tail()
    assert "on from-env " in job.log_text
    assert f"pwd={builds}/" in job.log_text and "x=y" in job.log_text
    check_run(gitlab, d, [job])


def run_single(args, env=None):
    e = dict(os.environ)
    e.pop("CONFIG_FILE", None)
    e.update(env or {})
    return subprocess.run([RUNNER, "run-single"] + args, capture_output=True, text=True,
                          env=e, timeout=20)


def test_help_lists_gitlab_runners_options():
    out = run_single(["--help"]).stdout
    for flag in ["--wait-timeout", "-c, --config", "-r, --runner", "--shutdown-timeout",
                 "--builds-dir", "--cache-dir", "--env", "--description", "--limit",
                 "--output-limit", "--request-concurrency", "--clone-url", "--pre-build-script",
                 "--post-build-script", "--pre-get-sources-script", "--post-get-sources-script",
                 "--debug-trace-disabled", "--feature-flags", "--unhealthy-requests-limit",
                 "--job-status-final-update-retry-limit", "--cache-type", "--cache-shared",
                 "--custom_build_dir-enabled", "--max-builds", "-u, --url", "-t, --token"]:
        assert flag in out, f"{flag} not in:\n{out}"
    assert "[$RUNNER_BUILDS_DIR]" in out and "[$RUNNER_ENV]" in out


def test_bad_values_are_refused():
    assert run_single(["--wait-timeout", "soon"]).returncode == 2
    assert run_single(["--shutdown-timeout", "-1"]).returncode == 2
    r = run_single(["--url", "http://127.0.0.1:9", "--token", "glrt-x" * 3,
                    "--feature-flags", "FF_X"])
    assert r.returncode == 1 and "--feature-flags" in r.stderr
    r = run_single(["--url", "http://127.0.0.1:9", "--token", "glrt-x" * 3,
                    "--prepare-timeout", "soon"])
    assert r.returncode == 1 and "prepare_timeout" in r.stderr


def test_url_and_token_are_needed():
    r = run_single(["--executor", "shell"])
    assert r.returncode == 2 and "--url and --token are needed" in r.stderr
