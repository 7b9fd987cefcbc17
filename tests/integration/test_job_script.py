"""The job script as the user's shell runs it: variables, GITLAB_ENV, after_script,
timeouts, custom build directories, concurrency, bash and sh alike.

Sources are not fetched here (without_sources); test_job_sources.py covers them.
"""
import json
import os
import re
import time

import pytest

from daemon_helpers import add_job, check_run, daemons, entry, new_token, run_one, wait_until  # noqa: F401

METACHARS = "a'b\"c $HOME `true` \\n ; | & * ? ~ ! # { } ( ) < >"


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_variables_of_every_kind_reach_the_script_exactly(gitlab, daemons, tmp_path, shell):
    job = run_one(gitlab, daemons, tmp_path, entry_keys={"shell": shell}, script=[
        'printf "PLAIN=[%s]\\n" "$PLAIN"',
        'printf "META=[%s]\\n" "$META"',
        'printf "EXPANDED=[%s]\\n" "$EXPANDED"',
        'printf "RAW=[%s]\\n" "$RAW"',
        'printf "FILE=[%s]\\n" "$(cat "$CONFIG_FILE")"',
        'test -f "$CONFIG_FILE" && echo FILE-IS-A-FILE',
        'printf "MULTI=[%s]\\n" "$MULTI"',
        'echo "JOB_ID=$CI_JOB_ID"',
        'printf "BASH=[%s]\\n" "${BASH_VERSION:-none}"',
    ], variables={
        "PLAIN": "plain value",
        "META": {"value": METACHARS, "raw": True},     # raw: $HOME stays for the shell to not expand
        "EXPANDED": "before-${PLAIN}-after$NOT_A_JOB_VARIABLE",
        "RAW": {"value": "keep $PLAIN as is", "raw": True},
        "CONFIG_FILE": {"value": "line one\nline 'two' $PLAIN", "file": True},
        "MULTI": "first\nsecond",
    })
    log = job.log_text
    assert job.status == "success", log
    assert "PLAIN=[plain value]" in log
    assert f"META=[{METACHARS}]" in log
    assert "EXPANDED=[before-plain value-after]" in log
    assert "RAW=[keep $PLAIN as is]" in log
    assert "FILE=[line one" in log and "line 'two' plain value]" in log   # expanded: not raw
    assert "FILE-IS-A-FILE" in log
    assert "MULTI=[first" in log and "second]" in log
    assert f"JOB_ID={job.id}" in log
    assert ("BASH=[none]" in log) == (shell == "sh"), "the stage ran in the wrong shell"


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_a_reference_to_a_file_variable_is_its_path(gitlab, daemons, tmp_path, shell):
    """gitlab-runner's Variables.Get: $FILE_VAR inside another value is the file's path
    (RUNNER_TEMP_PROJECT_DIR/FILE_VAR), so the secret is never copied into a plain variable."""
    secret = "t0p-s3cr3t-c0ntent"
    job = run_one(gitlab, daemons, tmp_path, entry_keys={"shell": shell}, script=[
        'printf "REF=[%s]\\n" "$REF"',
        'test "$REF" = "$SECRET_FILE.txt" && echo REF-IS-THE-PATH',
        'test "$RUNNER_TEMP_PROJECT_DIR/SECRET_FILE" = "$SECRET_FILE" && echo IN-THE-TEMP-DIR',
        'printf "IN-ENV=[%s]\\n" "$(env | grep -c t0p-s3cr3t)"',
    ], variables={
        "SECRET_FILE": {"value": secret, "file": True},
        "REF": "${SECRET_FILE}.txt",
    })
    log = job.log_text
    assert job.status == "success", log
    assert "REF-IS-THE-PATH" in log and "IN-THE-TEMP-DIR" in log
    assert "/SECRET_FILE.txt]" in log
    assert secret not in log
    assert "IN-ENV=[0]" in log


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_a_dollar_before_no_name_is_kept(gitlab, daemons, tmp_path, shell):
    """Go's os.Expand, which gitlab-runner expands variables with: '$' before a byte that
    starts no name stays; "$$" is "$"; "${}" is eaten."""
    job = run_one(gitlab, daemons, tmp_path, entry_keys={"shell": shell}, script=[
        'printf "ODD=[%s]\\n" "$ODD"',
    ], variables={"ODD": "$/dsa a$|b x$.y $$ cost 5$ ${}end"})
    log = job.log_text
    assert job.status == "success", log
    assert "ODD=[$/dsa a$|b x$.y $ cost 5$ end]" in log


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_gitlab_env_carries_from_script_to_after_script(gitlab, daemons, tmp_path, shell):
    job = run_one(gitlab, daemons, tmp_path, entry_keys={"shell": shell}, script=[
        'echo "FROM_SCRIPT=set in script" >> "$GITLAB_ENV"',
        'echo "the script ends"'],
        after_script=['echo "after sees [$FROM_SCRIPT] status=$CI_JOB_STATUS"'])
    assert job.status == "success", job.log_text
    assert "after sees [set in script] status=success" in job.log_text


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_after_script_runs_after_a_failure_and_sees_failed(gitlab, daemons, tmp_path, shell):
    job = run_one(gitlab, daemons, tmp_path, entry_keys={"shell": shell}, script=["false", "echo never printed"],
                  after_script=['echo "after: $CI_JOB_STATUS"', "exit 7"])
    log = job.log_text
    assert job.status == "failed" and job.failure_reason == "script_failure", log
    assert "after: failed" in log
    assert "never printed" not in log.replace("$ echo never printed", "")
    # after_script's own failure does not change the job's exit code.
    assert job.exit_code == 1


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_a_masked_secret_split_by_the_script_is_still_hidden(gitlab, daemons, tmp_path, shell):
    secret = "Sup3r-s3cret-t0ken-value"
    job = run_one(gitlab, daemons, tmp_path, entry_keys={"shell": shell}, script=[
        'printf "%s" "${S%%-*}"; sleep 0.3; printf "%s\\n" "-${S#*-}"',
        'echo "whole: $S"'],
        variables={"S": {"value": secret, "masked": True}})
    log = job.log_text
    assert job.status == "success", log
    assert secret not in log
    assert log.count("[MASKED]") >= 2


def test_every_token_mask_prefix_of_the_payload_masks(gitlab, daemons, tmp_path):
    """common/buildtest/masking.go: the payload's prefixes join the 14 defaults
    (FF_MASK_ALL_DEFAULT_TOKENS is on), ranked shortest first, and all three mask."""
    from gitlab_double import FAILURE_REASONS

    job = run_one(gitlab, daemons, tmp_path, script=['echo "TOKEN_REVEALS=$TOKEN_REVEALS"'],
                  variables={"TOKEN_REVEALS": "glpat-abcdef mytoken:ghijklmno foobar-pqrstuvwxyz"},
                  features={"trace_sections": True, "failure_reasons": list(FAILURE_REASONS),
                            "token_mask_prefixes": ["glpat-", "mytoken:", "foobar-"]})
    log = job.log_text
    assert job.status == "success", log
    for leak in ("glpat-abcdef", "mytoken:ghijklmno", "foobar-pqrstuvwxyz"):
        assert leak not in log
    assert "TOKEN_REVEALS=glpat-[MASKED] mytoken:[MASKED] foobar-[MASKED]" in log


_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z [0-9a-f]{2}[OE][ +]", re.M)


@pytest.mark.parametrize("where", ["job", "environment", "config"])
def test_ff_timestamps_off_from_the_job_the_environment_or_config(gitlab, daemons, tmp_path,
                                                                 where):
    """common/build.go populateFeatureFlags: [runners.feature_flags], else the last of the
    runner's environment and the job's variables, else the default (FF_TIMESTAMPS: on)."""
    keys, variables = {}, {}
    if where == "job":
        variables = {"FF_TIMESTAMPS": "false"}
    elif where == "environment":
        keys = {"environment": ["FF_TIMESTAMPS=false"]}
    else:
        # config.toml wins over a job that asks for timestamps.
        keys = {"feature_flags": {"FF_TIMESTAMPS": False}}
        variables = {"FF_TIMESTAMPS": "true"}
    job = run_one(gitlab, daemons, tmp_path, entry_keys=keys, variables=variables,
                  script=['echo "flag in the job: $FF_TIMESTAMPS"'])
    log = job.log_text
    assert job.status == "success", log
    assert "flag in the job: false" in log
    assert not _STAMP.search(log), log


def test_the_job_can_turn_timestamps_on_when_config_is_silent(gitlab, daemons, tmp_path):
    job = run_one(gitlab, daemons, tmp_path, entry_keys={"environment": ["FF_TIMESTAMPS=false"]},
                  variables={"FF_TIMESTAMPS": "true"}, script=["echo stamped"])
    assert job.status == "success", job.log_text
    assert re.search(r"Z 01O stamped$", job.log_text, re.M), job.log_text


def test_ff_mask_all_default_tokens_off_as_a_job_variable(gitlab, daemons, tmp_path):
    """With FF_MASK_ALL_DEFAULT_TOKENS=false from the job only glpat- is a default prefix."""
    job = run_one(gitlab, daemons, tmp_path, variables={
        "FF_MASK_ALL_DEFAULT_TOKENS": "false",
        "T": "glpat-abcdef glrt-ghijklm gldt-nopqrst"}, script=['echo "T=$T"'])
    log = job.log_text
    assert job.status == "success", log
    assert "T=glpat-[MASKED] glrt-ghijklm gldt-nopqrst" in log


def test_the_job_token_is_in_no_command_line(gitlab, daemons, tmp_path):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "script", builds_dir=str(tmp_path / "builds"))])
    job = add_job(gitlab, r, script=["echo started", "sleep 5"])
    d.start()
    wait_until(lambda: "started" in job.log_text, 30, "the job to start")
    seen = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if job.token.encode() in cmd or d.entries[0]["token"].encode() in cmd:
            seen.append(cmd.replace(b"\0", b" ").decode(errors="replace"))
    gitlab.wait_for_job(job, ("success", "failed"), timeout=30)
    assert d.stop() == 0
    assert seen == [], seen
    check_run(gitlab, d, [job])


def test_runner_script_timeout_fails_the_script_and_after_script_still_runs(gitlab, daemons,
                                                                            tmp_path):
    started = time.monotonic()
    job = run_one(gitlab, daemons, tmp_path, script=["echo going to sleep", "sleep 30"],
                  after_script=['echo "after: $CI_JOB_STATUS"'],
                  variables={"RUNNER_SCRIPT_TIMEOUT": "2s"})
    log = job.log_text
    assert job.status == "failed", log
    assert job.failure_reason == "job_execution_timeout", log
    # gitlab-runner's runtimeStateAndError(): a script timeout is "timedout", not "failed".
    assert "after: timedout" in log
    assert time.monotonic() - started < 25


def test_git_clone_path_needs_custom_build_dir(gitlab, daemons, tmp_path):
    builds = tmp_path / "builds"
    wanted = f"{builds}/custom/place"
    allowed = run_one(gitlab, daemons, tmp_path / "a",
                      entry_keys={"builds_dir": str(builds), "custom_build_dir": {"enabled": True}},
                      script=["echo DIR=$(pwd)", 'echo "PROJECT=$CI_PROJECT_DIR"'],
                      variables={"GIT_CLONE_PATH": "$CI_BUILDS_DIR/custom/place"})
    assert allowed.status == "success", allowed.log_text
    assert f"DIR={wanted}" in allowed.log_text
    assert f"PROJECT={wanted}" in allowed.log_text

    refused = run_one(gitlab, daemons, tmp_path / "b",
                      entry_keys={"builds_dir": str(builds)},
                      script=["echo must not run"],
                      variables={"GIT_CLONE_PATH": "$CI_BUILDS_DIR/custom/place"})
    assert refused.status == "failed"
    assert refused.failure_reason == "runner_configuration_error", refused.report()
    assert "enable `custom_build_dir` feature" in refused.log_text
    assert "must not run" not in refused.log_text


def test_two_concurrent_jobs_of_one_project_get_different_directories(gitlab, daemons,
                                                                      tmp_path):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "script", builds_dir=str(tmp_path / "builds"),
                               limit=3)], concurrent=3)
    script = ['echo "DIR=$CI_PROJECT_DIR"', 'echo "CPID=$CI_CONCURRENT_PROJECT_ID"',
              "touch here", "sleep 2", "ls here"]
    a = add_job(gitlab, r, script=script)
    b = add_job(gitlab, r, script=script)
    other = add_job(gitlab, r, script=script, project="other/thing", project_id=2)
    d.start()
    for job in (a, b, other):
        gitlab.wait_for_job(job, ("success", "failed"), timeout=60)
    assert d.stop() == 0

    def out(job, key):
        assert job.status == "success", job.log_text
        return [line.split(key + "=", 1)[1] for line in job.log_text.splitlines()
                if key + "=" in line and "$ " not in line][0]

    dirs = [out(j, "DIR") for j in (a, b, other)]
    assert len(set(dirs)) == 3, dirs
    # A slot per project: the two jobs of group/project hold 0 and 1, the
    # other project's job its own 0.
    assert sorted([out(a, "CPID"), out(b, "CPID")]) == ["0", "1"]
    assert out(other, "CPID") == "0"
    assert dirs[2].endswith("/0/other/thing")
    check_run(gitlab, d, [a, b, other])


def test_two_entries_with_one_token_share_the_slots(gitlab, daemons, tmp_path):
    """Two [[runners]] entries, one token (two limits for one GitLab runner): the
    slots are the token's, so two jobs of one project, one per entry, running at
    the same time get two directories, as in gitlab-runner's builds helper."""
    r = gitlab.add_runner(token=new_token())
    builds = tmp_path / "builds"
    meet = tmp_path / "meet"
    meet.mkdir()
    d = daemons(gitlab, [entry(gitlab, r, "first", builds_dir=str(builds), limit=1),
                         entry(gitlab, r, "second", builds_dir=str(builds), limit=1)],
                concurrent=2)
    # Each job waits (bounded) until both run, so they overlap for certain.
    script = ['echo "DIR=$CI_PROJECT_DIR"', 'echo "CID=$CI_CONCURRENT_ID"',
              f'touch {meet}/$CI_JOB_ID',
              f'for i in $(seq 600); do [ "$(ls {meet} | wc -l)" -ge 2 ] && break; '
              'sleep 0.1; done',
              f'echo "MET=$(ls {meet} | wc -l)"']
    a = add_job(gitlab, r, script=script)
    b = add_job(gitlab, r, script=script)
    d.start()
    for job in (a, b):
        gitlab.wait_for_job(job, ("success", "failed"), timeout=90)
    assert d.stop() == 0

    def out(job, key):
        assert job.status == "success", job.log_text
        return [line.split(key + "=", 1)[1] for line in job.log_text.splitlines()
                if key + "=" in line and "$ " not in line][0]

    assert out(a, "MET") == "2" and out(b, "MET") == "2", "the jobs did not overlap"
    assert {out(a, "CID"), out(b, "CID")} == {"0", "1"}
    assert out(a, "DIR") != out(b, "DIR")
    check_run(gitlab, d, [a, b])


def test_config_environment_and_the_tls_ca_file_variable(gitlab_tls, tls_files, daemons,
                                                         tmp_path):
    gitlab = gitlab_tls
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "script", builds_dir=str(tmp_path / "builds"),
                               environment=["FROM_CONFIG=config value", "BOTH=from config"],
                               **{"tls-ca-file": tls_files.ca_cert})])
    job = add_job(gitlab, r, variables={"BOTH": "from the job"}, script=[
        'echo "FROM_CONFIG=[$FROM_CONFIG] BOTH=[$BOTH]"',
        'cmp "$CI_SERVER_TLS_CA_FILE" ' + tls_files.ca_cert + ' && echo CA-FILE-MATCHES',
        'echo "CI_SERVER=$CI_SERVER"'])
    d.start()
    gitlab.wait_for_job(job, ("success", "failed"), timeout=60)
    assert d.stop() == 0
    log = job.log_text
    assert job.status == "success", log
    # The job's own variables come after config.toml's environment, so they win.
    assert "FROM_CONFIG=[config value] BOTH=[from the job]" in log
    assert "CA-FILE-MATCHES" in log
    assert "CI_SERVER=yes" in log
    check_run(gitlab, d, [job])


def test_jobs_over_https_reuse_the_connection(gitlab_tls, tls_files, daemons, tmp_path):
    """Once warm, a job costs no TLS handshake: the requests of every job share the
    connections of the first (the tls benchmark counts the same thing over 100 jobs)."""
    gitlab = gitlab_tls
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "tls", builds_dir=str(tmp_path / "builds"),
                               **{"tls-ca-file": tls_files.ca_cert})])
    jobs = [add_job(gitlab, r, script=["echo hi"]) for _ in range(5)]
    d.start()
    for job in jobs:
        gitlab.wait_for_job(job, ("success", "failed"), timeout=60)
    assert d.stop() == 0
    assert [j.status for j in jobs] == ["success"] * 5
    # A trace PATCH may overlap a status PUT and need a second connection; a
    # connection per job (or per request) would be 5 or more.
    assert gitlab.tls_handshakes == gitlab.accepted_connections <= 2, (
        gitlab.tls_handshakes, gitlab.accepted_connections)
    assert len(gitlab.requests) >= 15
    check_run(gitlab, d, jobs)


# A job written with GitLab Functions: Rails sends its steps as `run` (a string holding
# a JSON array, gitlab-runner's JobResponse.Run) and no script step of its own.
RUN_STEPS = json.dumps([{"name": "hello", "script": "touch ran-a-step"}])


def test_a_job_given_as_run_steps_fails_at_once_as_runner_unsupported(gitlab, daemons,
                                                                       tmp_path):
    job = run_one(gitlab, daemons, tmp_path, steps=[], run=RUN_STEPS,
                  variables={"GIT_STRATEGY": "empty"})
    log = job.log_text
    assert job.status == "failed", log
    assert job.failure_reason == "runner_unsupported", job.report()
    assert job.exit_code == 3
    assert "ERROR: this job gives its steps with the `run:` keyword (GitLab Functions)" in log
    assert "Preparing environment" not in log, "a stage ran"
    assert "Job succeeded" not in log
    assert not list((tmp_path / "builds").rglob("ran-a-step"))


def test_run_steps_on_a_gitlab_without_runner_unsupported(gitlab, daemons, tmp_path):
    from gitlab_double.payloads import FAILURE_REASONS
    reasons = [r for r in FAILURE_REASONS if r != "runner_unsupported"]
    job = run_one(gitlab, daemons, tmp_path, steps=[], run=RUN_STEPS,
                  features={"trace_sections": True, "failure_reasons": reasons})
    assert job.status == "failed", job.log_text
    assert job.failure_reason == "runner_system_failure", job.report()
