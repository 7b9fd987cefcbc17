"""Which stages run, and what their ends mean (protocol.md 9.1, 9.4, 9.5).

File variables live only while the job does, after_script is skipped
after the job timeout and its failure counts only when asked, hooks from
config.toml run around the user's script, and a builds directory that
cannot be made is a system failure that says so.
"""
import os
import stat

from daemon_helpers import (add_job, check_run, daemons, entry, new_token, pid_gone,  # noqa: F401
                            run_one, wait_until)


def printed(log, key):
    """The value of the job's 'KEY=value' output line."""
    for line in log.splitlines():
        if f"{key}=" in line and "$ " not in line:
            return line.split(f"{key}=", 1)[1]
    raise AssertionError(f"{key} not printed:\n{log}")


def test_file_variables_are_private_and_removed_at_cleanup(gitlab, daemons, tmp_path):
    job = run_one(gitlab, daemons, tmp_path, script=[
        'echo "PATH_OF=$KEY_FILE"', 'echo "MODE=$(stat -c %a "$KEY_FILE")"'],
        variables={"KEY_FILE": {"value": "private key material", "file": True}})
    log = job.log_text
    assert job.status == "success", log
    assert printed(log, "MODE") == "600"
    path = printed(log, "PATH_OF")
    assert path.startswith(str(tmp_path / "builds")), path
    assert not os.path.exists(path), "the file variable outlived the job"
    assert "cleanup_file_variables" in log


def test_after_script_errors_count_only_when_asked(gitlab, daemons, tmp_path):
    ignored = run_one(gitlab, daemons, tmp_path / "a", script=["echo fine"],
                      after_script=["exit 4"])
    assert ignored.status == "success", ignored.log_text
    assert "after_script failed, but the job continues" in ignored.log_text

    counted = run_one(gitlab, daemons, tmp_path / "b", script=["echo fine"],
                      after_script=["exit 4"],
                      variables={"AFTER_SCRIPT_IGNORE_ERRORS": "false"})
    assert counted.status == "failed", counted.log_text
    assert counted.failure_reason == "script_failure"
    assert counted.exit_code == 4


def test_the_job_timeout_skips_after_script_and_kills_background_processes(gitlab, daemons,
                                                                           tmp_path):
    pidfile = tmp_path / "bg.pid"
    marker = tmp_path / "after-ran"
    job = run_one(gitlab, daemons, tmp_path, wait_s=60, timeout=2,
                  script=[f"sleep 1000 & echo $! > {pidfile}", "echo started", "sleep 1000"],
                  after_script=[f"touch {marker}"])
    assert job.status == "failed", job.log_text
    assert job.failure_reason == "job_execution_timeout"
    assert not marker.exists(), "after_script ran after the job timeout"
    pid = int(pidfile.read_text())
    wait_until(lambda: pid_gone(pid), 15, "the background sleep to be killed")


def test_config_hooks_run_around_the_script(gitlab, daemons, tmp_path):
    job = run_one(gitlab, daemons, tmp_path,
                  entry_keys={"pre_build_script": "echo HOOK=pre-build",
                              "post_build_script": "echo HOOK2=post-build"},
                  script=["echo USER=script"])
    log = job.log_text
    assert job.status == "success", log
    pre, user, post = (log.index(s) for s in ("HOOK=pre-build", "USER=script",
                                               "HOOK2=post-build"))
    assert pre < user < post


def test_an_unusable_builds_dir_is_a_system_failure(gitlab, daemons, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the builds directory should be\n")
    job = run_one(gitlab, daemons, tmp_path, entry_keys={"builds_dir": str(blocker / "builds")},
                  script=["echo must not run"])
    assert job.status == "failed", job.log_text
    assert job.failure_reason == "runner_system_failure", job.report()
    assert "builds directory" in job.log_text
    assert "must not run" not in job.log_text
    assert stat.S_ISREG(os.stat(blocker).st_mode)


def test_ci_debug_trace_and_debug_trace_disabled(gitlab, daemons, tmp_path):
    traced = run_one(gitlab, daemons, tmp_path / "a", script=["echo traced-command"],
                     variables={"CI_DEBUG_TRACE": "true"})
    assert traced.status == "success", traced.log_text
    assert "+ echo traced-command" in traced.log_text           # set -o xtrace
    queries = {p.query for p in gitlab.requests_for("PATCH", rf"/jobs/{traced.id}/trace$")}
    assert queries == {"debug_trace=true"}, queries

    refused = run_one(gitlab, daemons, tmp_path / "b", entry_keys={"debug_trace_disabled": True},
                      script=["echo not-traced"], variables={"CI_DEBUG_TRACE": "true"})
    assert refused.status == "success", refused.log_text
    assert "CI_DEBUG_TRACE: usage is disabled on this Runner" in refused.log_text
    assert "+ echo not-traced" not in refused.log_text
    queries = {p.query for p in gitlab.requests_for("PATCH", rf"/jobs/{refused.id}/trace$")}
    assert queries == {"debug_trace=false"}, queries


def test_a_missing_shell_is_a_system_failure_that_names_it(gitlab, daemons, tmp_path):
    empty_path = tmp_path / "empty-path"
    empty_path.mkdir()
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "stages", builds_dir=str(tmp_path / "builds"))],
                env={"PATH": str(empty_path)})
    job = add_job(gitlab, r, script=["echo must not run"])
    d.start()
    gitlab.wait_for_job(job, ("success", "failed"), timeout=60)
    assert d.stop() == 0
    log = job.log_text
    assert job.status == "failed", log
    assert job.failure_reason == "runner_system_failure", job.report()
    assert "bash" in log.split("Preparing environment", 1)[1], log
    assert "must not run" not in log
    check_run(gitlab, d, [job])


def test_every_payload_step_is_a_stage_and_script_sections_collapse(gitlab, daemons, tmp_path):
    from gitlab_double import job_payload
    from daemon_helpers import without_sources

    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "stages", builds_dir=str(tmp_path / "builds"),
                               feature_flags={"FF_SCRIPT_SECTIONS": True})])
    payload = job_payload(variables=without_sources(),
                          script=["echo one-liner", "echo multi\necho line"])
    # Rails turns release: into a step whose lines the runner expands itself.
    payload["variables"].append({"key": "TAG", "value": "v1.2.3", "public": True, "masked": False})
    payload["steps"].append({"name": "release", "script": ["echo 'RELEASE-STEP $TAG'"],
                             "timeout": 3600, "when": "on_success", "allow_failure": False})
    job = gitlab.add_job(payload, runner=r)
    d.start()
    gitlab.wait_for_job(job, ("success", "failed"), timeout=60)
    assert d.stop() == 0
    log = job.log_text
    assert job.status == "success", log
    assert log.index(":step_script\r") < log.index(":step_release\r") < log.index("RELEASE-STEP v1.2.3")
    assert 'Executing "step_release" stage of the job script' in log
    # The multi-line command is a collapsed section of its own; the one-liner is not.
    assert ":section_script_step_1[hide_duration=true,collapsed=true]" in log
    assert "section_end:" in log.split("section_script_step_1[", 1)[1]
    assert "section_script_step_0" not in log
    check_run(gitlab, d, [job])


def test_cache_and_artifact_stages_run_in_gitlab_runners_order(gitlab, daemons, tmp_path):
    job = run_one(gitlab, daemons, tmp_path, script=["mkdir -p vendor", "echo built > out.txt",
                                                     "echo v > vendor/v"],
                  artifacts=[{"name": "out", "untracked": False, "paths": ["out.txt"],
                              "when": "on_success", "artifact_type": "archive",
                              "artifact_format": "zip", "expire_in": "1 day"}],
                  cache=[{"key": "k", "untracked": False, "policy": "pull-push",
                          "paths": ["vendor/"], "when": "on_success"}])
    log = job.log_text
    assert job.status == "success", log
    order = ["restore_cache", "step_script", "archive_cache", "upload_artifacts_on_success",
             "cleanup_file_variables"]
    at = [log.index(f":{name}\r") if f":{name}\r" in log else log.index(f":{name}\x1b")
          for name in order]
    assert at == sorted(at), log
    assert "Restoring cache" in log and "Saving cache for successful job" in log
    assert "Uploading artifacts for successful job" in log
    assert "download_artifacts" not in log          # no dependencies: skipped, no section


def test_after_script_timeout_ends_only_after_script(gitlab, daemons, tmp_path):
    job = run_one(gitlab, daemons, tmp_path, script=["echo fine"],
                  after_script=["echo after starts", "sleep 30", "echo never"],
                  variables={"RUNNER_AFTER_SCRIPT_TIMEOUT": "1s"})
    log = job.log_text
    assert job.status == "success", log             # after_script errors are ignored
    assert "after starts" in log
    assert "WARNING: after_script took longer than RUNNER_AFTER_SCRIPT_TIMEOUT" in log
    assert not any(line.endswith(" never") for line in log.splitlines()), log


def test_ff_enable_job_cleanup_removes_the_project_directory(gitlab, daemons, tmp_path):
    # gitlab-runner's writeCleanupBuildDirectoryScript: empty (and clone) remove the
    # project directory at cleanup, none leaves it and says so; the flag from
    # config.toml or from a job variable.
    script = ['echo "DIR=$CI_PROJECT_DIR"', "echo data > made-by-the-job"]
    empty = run_one(gitlab, daemons, tmp_path / "a", script=script,
                    variables={"GIT_STRATEGY": "empty", "FF_ENABLE_JOB_CLEANUP": "true"})
    assert empty.status == "success", empty.log_text
    assert not os.path.exists(printed(empty.log_text, "DIR")), "the project dir outlived the job"

    configured = run_one(gitlab, daemons, tmp_path / "b", script=script,
                         entry_keys={"feature_flags": {"FF_ENABLE_JOB_CLEANUP": True}},
                         variables={"GIT_STRATEGY": "empty"})
    assert configured.status == "success", configured.log_text
    assert not os.path.exists(printed(configured.log_text, "DIR"))

    none = run_one(gitlab, daemons, tmp_path / "c", script=script,
                   variables={"GIT_STRATEGY": "none", "FF_ENABLE_JOB_CLEANUP": "true"})
    assert none.status == "success", none.log_text
    assert "Skipping build directory cleanup step" in none.log_text
    assert os.path.exists(os.path.join(printed(none.log_text, "DIR"), "made-by-the-job"))

    off = run_one(gitlab, daemons, tmp_path / "d", script=script,
                  variables={"GIT_STRATEGY": "empty"})
    assert off.status == "success", off.log_text
    assert os.path.exists(os.path.join(printed(off.log_text, "DIR"), "made-by-the-job"))
