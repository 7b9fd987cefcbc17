"""The command line: help, version, usage errors, and `runner list`."""
import os
import platform
import re
import subprocess

from conftest import ROOT, run_runner


def test_help_lists_commands(runner_bin):
    r = run_runner(["--help"])
    assert r.returncode == 0
    assert r.stdout.startswith("usage: runner ")
    assert re.search(r"^  list\s+List the runners", r.stdout, re.M)
    assert run_runner(["help"]).stdout == r.stdout


def test_version_names_version_revision_platform(runner_bin):
    r = run_runner(["--version"])
    assert r.returncode == 0
    with open(os.path.join(ROOT, "VERSION")) as f:
        version = f.read().strip()
    assert f"Version:      {version}\n" in r.stdout
    rev = subprocess.run(["git", "rev-parse", "--short=8", "HEAD"], cwd=ROOT,
                         capture_output=True, text=True)
    if rev.returncode == 0:
        assert f"Git revision: {rev.stdout.strip()}\n" in r.stdout
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    assert f"OS/Arch:      linux/{arch}\n" in r.stdout
    assert run_runner(["-v"]).stdout == r.stdout


def test_no_command_is_a_usage_error(runner_bin):
    r = run_runner([])
    assert r.returncode == 2
    assert r.stderr.splitlines()[0] == "runner: no command given"
    assert "usage: runner" in r.stderr


def test_unknown_command_is_one_line_and_usage(runner_bin):
    r = run_runner(["frobnicate"])
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert lines[0] == "runner: unknown command 'frobnicate'"
    assert lines[1].startswith("usage: runner")
    assert r.stdout == ""


def test_unknown_global_flag(runner_bin):
    r = run_runner(["--frob", "list"])
    assert r.returncode == 2
    assert r.stderr.splitlines()[0] == "runner: unknown flag '--frob'"


def test_bad_log_level_is_refused(runner_bin):
    r = run_runner(["--log-level", "loud", "list"])
    assert r.returncode == 2
    assert "unknown log level 'loud'" in r.stderr


def test_unknown_list_flag(runner_bin, tmp_path):
    r = run_runner(["list", "--frob"])
    assert r.returncode == 2
    assert r.stderr.splitlines()[0] == "runner: list: unknown flag '--frob'"
    assert "usage: runner list" in r.stderr


def test_list_flag_without_value(runner_bin):
    r = run_runner(["list", "-c"])
    assert r.returncode == 2
    assert "needs a value" in r.stderr.splitlines()[0]


def test_list_example_config(runner_bin):
    r = run_runner(["list", "-c", os.path.join(ROOT, "config.toml.example")])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) >= 1
    for line in lines:
        assert re.match(r"^\S.* Executor=\S+ Token=\S* URL=https?://", line), line
    # The example documents every key: nothing in it is unknown.
    assert "unknown key" not in r.stderr


GITLAB_RUNNER_WRITTEN = """\
concurrent = 4
check_interval = 0
connection_max_age = "15m0s"
shutdown_timeout = 0

[session_server]
  session_timeout = 1800

[[runners]]
  name = "build-host-1"
  url = "https://gitlab.example.com/"
  id = 42
  token = "glrt-t1_AbCdEfGhIjKlMnOpQrSt"
  token_obtained_at = 2026-08-21T10:00:00Z
  token_expires_at = 0001-01-01T00:00:00Z
  executor = "shell"
  [runners.custom_build_dir]
    enabled = true
  [runners.cache]
    MaxUploadedArchiveSize = 0
    [runners.cache.s3]
      AssumeRoleMaxConcurrency = 0
    [runners.cache.gcs]
    [runners.cache.azure]
  [runners.feature_flags]
    FF_TIMESTAMPS = false
    FF_SCRIPT_SECTIONS = true

[[runners]]
  name = "custom-vm"
  url = "http://127.0.0.1:8080"
  id = 43
  token = "glrt-ZyXwVuTsRqPoNmLkJiHg"
  token_obtained_at = 2026-08-22T11:30:00.5+02:00
  token_expires_at = 2027-08-22T11:30:00Z
  executor = "custom"
  [runners.custom]
    config_exec = "/opt/driver/config.sh"
    prepare_exec = "/opt/driver/prepare.sh"
    run_exec = "/opt/driver/run.sh"
    run_args = ["--verbose"]
    cleanup_exec = "/opt/driver/cleanup.sh"
    cleanup_exec_timeout = 60
"""


def test_list_config_as_gitlab_runner_writes_it(runner_bin, tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text(GITLAB_RUNNER_WRITTEN)
    r = run_runner(["list", "-c", str(cfg)])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2
    assert re.match(r"^build-host-1 +Executor=shell Token=AbCdEfGh URL=https://gitlab.example.com/$", lines[0])
    assert re.match(r"^custom-vm +Executor=custom Token=ZyXwVuTs URL=http://127.0.0.1:8080$", lines[1])
    # Tokens are shortened: the full token never shows.
    assert "AbCdEfGhIjKl" not in r.stdout + r.stderr
    assert "ZyXwVuTsRqPo" not in r.stdout + r.stderr
    # The custom executor is not in this build yet: said, not hidden.
    assert re.search(r'config.toml:29: runner "custom-vm": executor "custom" is not supported', r.stderr)
    assert "unknown key" not in r.stderr


def test_list_expands_environment_in_url(runner_bin, tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('concurrent = 1\n[[runners]]\nname = "a"\nurl = "https://${GL_HOST}/"\n'
                   'token = "glrt-0123456789abcdef"\nexecutor = "shell"\n')
    r = run_runner(["list", "-c", str(cfg)], env={"GL_HOST": "gitlab.internal"})
    assert r.returncode == 0, r.stderr
    assert "URL=https://gitlab.internal/" in r.stdout


def test_list_names_entry_problems_and_keeps_them(runner_bin, tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('concurrent = 1\n'
                   '[[runners]]\nname = "ftp"\nurl = "ftp://x"\ntoken = "t-1234567890"\nexecutor = "shell"\n'
                   '[[runners]]\nname = "neg"\nurl = "https://x"\ntoken = "t-1234567890"\nexecutor = "shell"\nlimit = -1\n'
                   '[[runners]]\nname = "fish"\nurl = "https://x"\ntoken = "t-1234567890"\nexecutor = "shell"\nshell = "fish"\n'
                   '[[runners]]\nname = "ok"\nurl = "https://x"\ntoken = "t-1234567890"\nexecutor = "shell"\n')
    r = run_runner(["list", "-c", str(cfg)])
    assert r.returncode == 0, r.stderr
    assert [l.split()[0] for l in r.stdout.splitlines()] == ["ftp", "neg", "fish", "ok"]
    assert re.search(r':2: runner "ftp": url is not an http:// or https:// URL', r.stderr)
    assert re.search(r':7: runner "neg": limit is -1', r.stderr)
    assert re.search(r':13: runner "fish": shell "fish" is not supported', r.stderr)
    assert '"ok"' not in r.stderr


def test_list_warns_unknown_key_by_name(runner_bin, tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('concurrent = 1\nfrobnication = true\n[[runners]]\nname = "a"\n'
                   'url = "https://x"\ntoken = "t-1234567890"\nexecutor = "shell"\nbuids_dir = "/b"\n')
    r = run_runner(["list", "-c", str(cfg)])
    assert r.returncode == 0
    assert re.search(r"config.toml:2:\d+: unknown key frobnication \(kept as written\)", r.stderr)
    assert re.search(r"config.toml:8:\d+: unknown key runners\[0\]\.buids_dir", r.stderr)


def test_list_wrong_type_fails(runner_bin, tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('# comment\nconcurrent = "4"\n')
    r = run_runner(["list", "-c", str(cfg)])
    assert r.returncode == 1
    assert r.stdout == ""
    assert f"{cfg}:2:14: concurrent must be an integer, not a string" in r.stderr


def test_list_wrong_type_in_runner_fails(runner_bin, tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[[runners]]\nname = "a"\nlimit = "2"\n')
    r = run_runner(["list", "-c", str(cfg)])
    assert r.returncode == 1
    assert f"{cfg}:3:9: runners[0].limit must be an integer, not a string" in r.stderr


def test_list_syntax_error_names_line_and_column(runner_bin, tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('check_interval = 3\n\n[[runners]]\n  concurrent 4\n')
    r = run_runner(["list", "-c", str(cfg)])
    assert r.returncode == 1
    assert f"{cfg}:4:14: expected '=' after key \"concurrent\"" in r.stderr


def test_list_runners_as_table_fails(runner_bin, tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('concurrent = 1\n\n[runners]\n  name = "x"\n')
    r = run_runner(["list", "-c", str(cfg)])
    assert r.returncode == 1
    assert re.search(r":3:\d+: \[runners\] is a table, .*write \[\[runners\]\]", r.stderr)


def test_list_missing_file(runner_bin, tmp_path):
    r = run_runner(["list", "-c", str(tmp_path / "nope.toml")])
    assert r.returncode == 1
    assert "nope.toml: cannot read: No such file or directory" in r.stderr


def test_config_file_env_is_used(runner_bin, tmp_path):
    cfg = tmp_path / "env.toml"
    cfg.write_text('[[runners]]\nname = "from-env"\nurl = "https://x"\ntoken = "t-1"\nexecutor = "shell"\n')
    r = run_runner(["list"], env={"CONFIG_FILE": str(cfg)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("from-env ")


def test_default_config_path(runner_bin, tmp_path):
    r = run_runner(["list"], env={"HOME": str(tmp_path)})
    if os.geteuid() == 0:
        expected = "/etc/gitlab-runner/config.toml"
    else:
        expected = f"{tmp_path}/.gitlab-runner/config.toml"
    if os.path.exists(expected):
        assert r.returncode == 0
    else:
        assert r.returncode == 1
        assert f"{expected}: cannot read" in r.stderr


def test_json_log_format(runner_bin, tmp_path):
    r = run_runner(["--log-format", "json", "list", "-c", str(tmp_path / "x.toml")])
    assert r.returncode == 1
    import json
    rec = json.loads(r.stderr.splitlines()[0])
    assert rec["level"] == "error"
    assert "cannot read" in rec["msg"]


# --- global flags, as gitlab-runner's log/configuration.go declares them -----

def _daemon_log(args, env=None):
    """A run-single that asks a closed port for jobs and leaves after 1 s idle."""
    return run_runner(args + ["run-single", "--url", "http://127.0.0.1:9", "--token",
                              "glrt-t1_GlobalFlagsToken000", "--wait-timeout", "1"],
                      env=env, timeout=30)


def test_short_l_is_log_level(runner_bin):
    r = _daemon_log(["-l", "debug"])
    assert r.returncode == 0, r.stderr
    assert "DEBUG: daemon: " in r.stderr
    r = _daemon_log(["-l", "error"])
    assert "This runner has not received a job" not in r.stderr
    assert run_runner(["-l", "loud", "list"]).returncode == 2


def test_runner_debug_env_is_debug(runner_bin):
    assert "DEBUG: " in _daemon_log([], env={"RUNNER_DEBUG": "true"}).stderr
    assert "DEBUG: " not in _daemon_log([], env={"RUNNER_DEBUG": "false"}).stderr
    # --debug wins over a level, from the command line or the environment.
    assert "DEBUG: " in _daemon_log(["-l", "error"], env={"RUNNER_DEBUG": "1"}).stderr
    r = run_runner(["list"], env={"RUNNER_DEBUG": "maybe"})
    assert r.returncode == 2 and "$RUNNER_DEBUG" in r.stderr


def test_bad_log_level_or_format_in_the_environment_is_refused(runner_bin):
    r = run_runner(["list"], env={"LOG_LEVEL": "loud"})
    assert r.returncode == 2 and "$LOG_LEVEL: unknown log level 'loud'" in r.stderr
    r = run_runner(["list"], env={"LOG_FORMAT": "xml"})
    assert r.returncode == 2 and "$LOG_FORMAT: unknown log format 'xml'" in r.stderr


def test_help_command_is_the_commands_help(runner_bin):
    for name in ["run", "run-single", "health-check", "list"]:
        r = run_runner(["help", name])
        assert r.returncode == 0
        assert r.stdout == run_runner([name, "--help"]).stdout
        assert r.stdout.startswith(f"usage: runner {name}")
    r = run_runner(["help", "frobnicate"])
    assert r.returncode == 2 and "unknown command 'frobnicate'" in r.stderr
    top = run_runner(["--help"]).stdout
    assert "-l, --log-level" in top and "RUNNER_DEBUG" in top
    assert re.search(r"^  health-check\s+", top, re.M)
