"""`runner register` against the GitLab double (protocol.md 2.1-2.8).

Every test runs the real binary through the `cmd` fixture, which keeps
all of its output: each test ends with cmd.assert_no_tokens(...), which
fails if any token (runner, registration, PAT) the double or the test
knows appears in that output in more than a shortened form.  The fixture
fails a test that forgets to call it.

The helpers here (Cmd, new_token, write_config, ...) are also used by
test_runner_commands.py and test_tls.py.
"""
import hashlib
import hmac
import json
import os
import pty
import re
import secrets
import select
import shutil
import signal
import stat
import string
import subprocess
import tempfile
import termios
import time
import tomllib
from datetime import datetime, timedelta, timezone

import pytest

from conftest import RUNNER, SHARED

SYSTEM_ID_RE = re.compile(r"^[sr]_[0-9a-zA-Z]{12}$")
TIME_RE = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
ZERO_TIME = "0001-01-01T00:00:00Z"
SAMPLES = os.path.join(SHARED, "config-samples")

# Variables the commands read flags from (protocol.md 2.8): never inherited.
_FLAG_ENV = ("CONFIG_FILE", "CI_SERVER_URL", "CI_SERVER_TOKEN", "REGISTRATION_TOKEN",
             "RUNNER_NAME", "RUNNER_EXECUTOR", "RUNNER_SHELL", "RUNNER_TAG_LIST",
             "REGISTER_NON_INTERACTIVE", "REGISTER_RUN_UNTAGGED", "REGISTER_LOCKED",
             "REGISTER_ACCESS_LEVEL", "REGISTER_MAXIMUM_TIMEOUT", "REGISTER_PAUSED",
             "REGISTER_MAINTENANCE_NOTE", "REGISTER_LEAVE_RUNNER", "CI_SERVER_TLS_CA_FILE",
             "CI_SERVER_TLS_CERT_FILE", "CI_SERVER_TLS_KEY_FILE", "RUNNER_LIMIT",
             "RUNNER_BUILDS_DIR", "RUNNER_CACHE_DIR", "LOG_LEVEL", "LOG_FORMAT")
# A shortened token is at most 9 characters (log_token); `list` prints 8.
_WINDOW = 10


def new_token(prefix="glrt-t1_", n=20):
    """A random token; random so that no window of it shows up by chance."""
    alnum = string.ascii_letters + string.digits
    return prefix + "".join(secrets.choice(alnum) for _ in range(n))


def new_registration_token():
    return "GR1348941" + new_token("", 20)


def runner_env(extra=None):
    env = dict(os.environ)
    for k in _FLAG_ENV:
        env.pop(k, None)
    env.update(extra or {})
    return env


def tokens_seen_by(d):
    """Every token the double knows of or saw on the wire (also deleted runners')."""
    toks = set(d.registration_tokens) | set(d.pats)
    for r in d.runners.values():
        toks.add(r.token)
        toks.update(r.old_tokens)
    for q in d.requests:
        for h in ("Runner-Token", "Private-Token", "Job-Token"):
            toks.update(q.headers.get_all(h))
        for body in (q.body, q.response_body):
            try:
                obj = json.loads(body or b"")
            except ValueError:
                continue
            if isinstance(obj, dict) and isinstance(obj.get("token"), str):
                toks.add(obj["token"])
    return toks


class Cmd:
    """Runs build/runner and keeps every byte it printed, for assert_no_tokens."""

    def __init__(self):
        self.outputs = []
        self.tokens = set()
        self.checked = 0

    def __call__(self, *args, env=None, input=None, timeout=60, prefix=()):
        """Run `runner ARGS`; returns the CompletedProcess (text)."""
        p = subprocess.run(list(prefix) + [RUNNER] + [str(a) for a in args],
                           env=runner_env(env), input=input, capture_output=True,
                           text=True, timeout=timeout)
        self.outputs.append(p.stdout + p.stderr)
        return p

    def start(self, *args, env=None):
        """Start `runner ARGS` in the background; finish() collects it."""
        return subprocess.Popen([RUNNER] + [str(a) for a in args], env=runner_env(env),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def wait_stderr(self, proc, text, timeout=10):
        """Read proc's stderr until text appears (kept for finish())."""
        early = getattr(proc, "early_stderr", "")
        deadline = time.monotonic() + timeout
        while text not in early:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([proc.stderr], [], [], left)[0]:
                raise TimeoutError(f"{text!r} not on stderr within {timeout} s:\n{early}")
            # The raw fd, not the buffered file: communicate() reads the rest.
            chunk = os.read(proc.stderr.fileno(), 65536)
            if not chunk:
                raise AssertionError(f"stderr closed before {text!r}:\n{early}")
            early += chunk.decode(errors="replace")
        proc.early_stderr = early

    def finish(self, proc, timeout=30):
        out, err = proc.communicate(timeout=timeout)
        err = getattr(proc, "early_stderr", "") + err
        self.outputs.append(out + err)
        return proc.returncode, out, err

    def add_output(self, text):
        self.outputs.append(text)

    def secret(self, *tokens):
        """Tokens the double may not know (made-up wrong ones): check them too."""
        self.tokens.update(tokens)

    def assert_no_tokens(self, *doubles):
        """No token appears in any output so far in more than a shortened form."""
        toks = set(self.tokens)
        for d in doubles:
            toks |= tokens_seen_by(d)
        toks = {t for t in toks if isinstance(t, str) and len(t) >= _WINDOW}
        assert toks, "no tokens to check: the test should know some"
        text = "\n".join(self.outputs)
        for tok in sorted(toks):
            for i in range(len(tok) - _WINDOW + 1):
                assert tok[i:i + _WINDOW] not in text, \
                    f"token {tok[:8]}... appears in the runner's output:\n{text}"
        self.checked = len(self.outputs)


@pytest.fixture
def cmd(runner_bin, request):
    c = Cmd()
    failed = request.session.testsfailed
    yield c
    if request.session.testsfailed > failed:
        return  # the test failed already: that is the message that matters
    if c.checked != len(c.outputs):
        pytest.fail("the test did not call cmd.assert_no_tokens() after its last command",
                    pytrace=False)


def last_line(text, prefix="ERROR: "):
    """The last line that starts with prefix (the one-line error)."""
    lines = [ln for ln in text.splitlines() if ln.startswith(prefix)]
    assert lines, f"no line starting with {prefix!r} in:\n{text}"
    return lines[-1]


def read_toml(path):
    with open(path, "rb") as f:
        return tomllib.load(f)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def toml_time(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def runner_entry(url, token, name, id=0, extra=""):
    return (f'[[runners]]\n  name = "{name}"\n  url = "{url}"\n  id = {id}\n'
            f'  token = "{token}"\n  token_obtained_at = 2024-01-02T03:04:05Z\n'
            f'  token_expires_at = {ZERO_TIME}\n  executor = "shell"\n{extra}\n')


def write_config(path, *entries, globals_='concurrent = 4\ncheck_interval = 0\n'):
    """A config.toml with the given [[runners]] texts; returns its bytes."""
    text = globals_ + "\n" + "".join(entries)
    with open(path, "w") as f:
        f.write(text)
    return text.encode()


def list_names(cmd, cfg):
    """Runner names as `runner list` prints them (also checks the file parses)."""
    p = cmd("list", "-c", cfg)
    assert p.returncode == 0, p.stderr
    return [ln.split(" Executor=")[0].rstrip() for ln in p.stdout.splitlines()]


def register(cmd, cfg, url, *flags, env=None, timeout=60):
    return cmd("register", "-n", "-c", cfg, "--url", url, *flags, env=env, timeout=timeout)


# ---------------------------------------------------------------------------
# The authentication-token flow
# ---------------------------------------------------------------------------

EXPECTED_NEW_FILE = """concurrent = 1
check_interval = 0
connection_max_age = "15m0s"
shutdown_timeout = 0

[session_server]
  session_timeout = 1800

[[runners]]
  name = "my-runner"
  url = "{url}"
  id = 4242
  token = "{token}"
  token_obtained_at = {obtained}
  token_expires_at = {expires}
  executor = "shell"
  [runners.cache]
    MaxUploadedArchiveSize = 0
    [runners.cache.s3]
      AssumeRoleMaxConcurrency = 0
    [runners.cache.gcs]
    [runners.cache.azure]
"""


def test_register_glrt_writes_config_as_gitlab_runner(gitlab, cmd, tmp_path):
    runner = gitlab.add_runner(token=new_token(), id=4242)
    cfg = tmp_path / "config.toml"
    before = datetime.now(timezone.utc).replace(microsecond=0)
    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", "shell",
                 "--name", "my-runner")
    after = datetime.now(timezone.utc)
    assert p.returncode == 0, p.stderr
    assert "Runner registered successfully" in p.stderr
    assert f'Configuration (with the authentication token) was saved in "{cfg}"' in p.stderr

    text = cfg.read_text()
    m = re.search(r"^  token_obtained_at = (" + TIME_RE + ")$", text, re.M)
    assert m, text
    obtained = toml_time(m.group(1))
    assert before <= obtained <= after, (obtained, before, after)
    assert text == EXPECTED_NEW_FILE.format(url=gitlab.url, token=runner.token,
                                            obtained=m.group(1), expires=ZERO_TIME)
    assert stat.S_IMODE(os.stat(cfg).st_mode) == 0o600

    sid = (tmp_path / ".runner_system_id").read_text().strip()
    assert SYSTEM_ID_RE.match(sid), sid

    reqs = gitlab.requests
    assert [(q.method, q.path) for q in reqs] == [("POST", "/api/v4/runners/verify")]
    body = reqs[0].json()
    assert body["token"] == runner.token
    assert reqs[0].headers["Runner-Token"] == runner.token
    assert body["system_id"] == sid
    assert body["info"]["executor"] == "shell"
    assert "Private-Token" not in reqs[0].headers
    assert runner.system_ids == {sid}

    assert list_names(cmd, cfg) == ["my-runner"]
    cmd.assert_no_tokens(gitlab)


def test_register_glrt_writes_the_expiry_gitlab_gives(gitlab, cmd, tmp_path):
    expires = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(days=30)
    runner = gitlab.add_runner(token=new_token(), id=77, expires_at=expires)
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", "shell",
                 "--name", "exp")
    assert p.returncode == 0, p.stderr
    entry = read_toml(cfg)["runners"][0]
    assert entry["id"] == 77
    assert entry["token_expires_at"] == expires
    assert entry["token_obtained_at"].tzinfo is not None
    cmd.assert_no_tokens(gitlab)


def test_register_keeps_an_existing_system_id(gitlab, cmd, tmp_path):
    (tmp_path / ".runner_system_id").write_text("s_0123456789ab\n")
    runner = gitlab.add_runner(token=new_token())
    p = register(cmd, tmp_path / "config.toml", gitlab.url, "--token", runner.token,
                 "--executor", "shell")
    assert p.returncode == 0, p.stderr
    assert gitlab.requests[0].json()["system_id"] == "s_0123456789ab"
    assert (tmp_path / ".runner_system_id").read_text() == "s_0123456789ab\n"
    cmd.assert_no_tokens(gitlab)


def test_register_derives_the_system_id_from_the_machine_id(gitlab, cmd, tmp_path):
    """s_ + the first 12 hex digits of HMAC-SHA256(machine id, "gitlab-runner") (2.6)."""
    try:
        with open("/etc/machine-id") as f:
            machine_id = f.readline().strip()
    except OSError:
        machine_id = ""
    if not machine_id:
        pytest.skip("no /etc/machine-id: the system id is random (r_...)")
    want = "s_" + hmac.new(machine_id.encode(), b"gitlab-runner",
                           hashlib.sha256).hexdigest()[:12]
    runner = gitlab.add_runner(token=new_token())
    p = register(cmd, tmp_path / "config.toml", gitlab.url, "--token", runner.token,
                 "--executor", "shell")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / ".runner_system_id").read_text() == want + "\n"
    assert runner.system_ids == {want}
    cmd.assert_no_tokens(gitlab)


def test_register_replaces_a_malformed_system_id(gitlab, cmd, tmp_path):
    (tmp_path / ".runner_system_id").write_text("not-an-id\n")
    runner = gitlab.add_runner(token=new_token())
    p = register(cmd, tmp_path / "config.toml", gitlab.url, "--token", runner.token,
                 "--executor", "shell")
    assert p.returncode == 0, p.stderr
    assert re.search(r'^WARNING: .*\.runner_system_id: "not-an-id" is not a system ID',
                     p.stderr, re.M), p.stderr
    sid = (tmp_path / ".runner_system_id").read_text().strip()
    assert SYSTEM_ID_RE.match(sid)
    assert gitlab.requests[0].json()["system_id"] == sid
    cmd.assert_no_tokens(gitlab)


def test_register_non_glrt_token_is_only_verified(gitlab, cmd, tmp_path):
    """--token with a token that is not glrt-: verified, not registered (2.1)."""
    runner = gitlab.add_runner(token=new_token(prefix=""), id=31)
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", "shell",
                 "--name", "old")
    assert p.returncode == 0, p.stderr
    assert [(q.method, q.path) for q in gitlab.requests] == [
        ("POST", "/api/v4/runners/verify")]
    entry = read_toml(cfg)["runners"][0]
    assert (entry["id"], entry["token"]) == (31, runner.token)
    cmd.assert_no_tokens(gitlab)


def test_register_reads_gitlab_runners_environment_variables(gitlab, cmd, tmp_path):
    reg = new_registration_token()
    gitlab.registration_tokens.add(reg)
    cfg = tmp_path / "config.toml"
    p = cmd("register", env={
        "CONFIG_FILE": str(cfg), "REGISTER_NON_INTERACTIVE": "true",
        "CI_SERVER_URL": gitlab.url, "REGISTRATION_TOKEN": reg, "RUNNER_NAME": "from-env",
        "RUNNER_EXECUTOR": "shell", "RUNNER_TAG_LIST": "a,b", "REGISTER_LOCKED": "false"})
    assert p.returncode == 0, p.stderr
    body = gitlab.requests[0].json()
    assert (body["description"], body["tag_list"], body["locked"]) == ("from-env", "a,b", False)
    entry = read_toml(cfg)["runners"][0]
    assert (entry["name"], entry["executor"]) == ("from-env", "shell")
    cmd.assert_no_tokens(gitlab)


def test_register_without_executor_is_an_error(gitlab, cmd, tmp_path):
    runner = gitlab.add_runner(token=new_token())
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "--token", runner.token)
    assert p.returncode == 1
    assert last_line(p.stderr).startswith("ERROR: register: the executor is needed")
    assert gitlab.requests == []
    assert not cfg.exists()
    cmd.assert_no_tokens(gitlab)


# Samples with unknown keys, deep tables, many runners, datetimes, quoted keys.
KEEP_SAMPLES = ["01-runner-config-example.toml", "08-docs-machine-autoscale-s3.toml",
                "15-docs-k8s-affinity-deep-headers.toml",
                "31-real-two-runners-token-datetimes.toml",
                "33-real-hyphen-keys-empty-tables.toml", "35-real-sixteen-runners.toml",
                "37-real-tmpfs-quoted-keys.toml", "39-real-feature-flags-misplaced-tags.toml"]


@pytest.mark.parametrize("sample", KEEP_SAMPLES)
def test_register_into_existing_config_keeps_everything(gitlab, cmd, tmp_path, sample,
                                                        shared_dir):
    cfg = tmp_path / "config.toml"
    shutil.copy(os.path.join(SAMPLES, sample), cfg)
    old_doc = read_toml(cfg)
    old_names = list_names(cmd, cfg)
    runner = gitlab.add_runner(token=new_token(), id=5151)

    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", "shell",
                 "--name", "added-by-test")
    assert p.returncode == 0, p.stderr

    new_doc = read_toml(cfg)
    new_runners = new_doc.pop("runners")
    old_runners = old_doc.pop("runners", [])
    assert new_doc == old_doc, "the globals and their tables changed"
    assert new_runners[:-1] == old_runners, "an existing entry changed"
    added = new_runners[-1]
    assert (added["name"], added["url"], added["id"], added["token"], added["executor"]) == \
        ("added-by-test", gitlab.url, 5151, runner.token, "shell")
    assert list_names(cmd, cfg) == old_names + ["added-by-test"]
    cmd.assert_no_tokens(gitlab)


def test_register_twice_appends_a_second_entry(gitlab, cmd, tmp_path):
    cfg = tmp_path / "config.toml"
    one, two = gitlab.add_runner(token=new_token()), gitlab.add_runner(token=new_token())
    assert register(cmd, cfg, gitlab.url, "-t", one.token, "--executor", "shell",
                    "--name", "one").returncode == 0
    first = read_toml(cfg)
    p = register(cmd, cfg, gitlab.url, "-t", two.token, "--executor", "shell",
                 "--name", "two", "--limit", "3")
    assert p.returncode == 0, p.stderr
    doc = read_toml(cfg)
    assert doc["runners"][0] == first["runners"][0]
    assert [r["name"] for r in doc["runners"]] == ["one", "two"]
    assert doc["runners"][1]["limit"] == 3
    assert doc["concurrent"] == 1
    # limit 3 > concurrent 1: gitlab-runner warns (2.7).
    assert re.search(r"^WARNING: .*limit \(3\) is larger than the global concurrent \(1\)",
                     p.stderr, re.M), p.stderr
    cmd.assert_no_tokens(gitlab)


def test_register_writes_the_optional_flags(gitlab, cmd, tmp_path):
    runner = gitlab.add_runner(token=new_token(), id=5)
    cfg = tmp_path / "config.toml"
    name = 'we "ird" \\ n\u00e4me\ttab'
    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", "shell",
                 "--name", name, "--shell", "bash", "--builds-dir", "/b d",
                 "--cache-dir", "/c", "--env", "A=1", "--env", "B=x y", "--limit", "1",
                 "--output-limit", "8192", "--pre-build-script", "echo 'pre'",
                 "--debug-trace-disabled", "--custom_build_dir-enabled")
    assert p.returncode == 0, p.stderr
    entry = read_toml(cfg)["runners"][0]
    assert entry["name"] == name
    assert (entry["shell"], entry["builds_dir"], entry["cache_dir"]) == ("bash", "/b d", "/c")
    assert entry["environment"] == ["A=1", "B=x y"]
    assert (entry["limit"], entry["output_limit"]) == (1, 8192)
    assert entry["pre_build_script"] == "echo 'pre'"
    assert entry["debug_trace_disabled"] is True
    assert entry["custom_build_dir"] == {"enabled": True}
    assert gitlab.requests[0].json()["info"]["shell"] == "bash"
    assert list_names(cmd, cfg) == [name]
    cmd.assert_no_tokens(gitlab)


def test_register_refuses_an_invalid_config_before_any_request(gitlab, cmd, tmp_path):
    runner = gitlab.add_runner(token=new_token())
    cfg = tmp_path / "config.toml"
    cfg.write_text("concurrent = 1\n[[runners]\n")
    old = read_bytes(cfg)
    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", "shell")
    assert p.returncode == 1
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("ERROR:")]
    assert len(errors) == 1 and errors[0].startswith(f"ERROR: {cfg}:2:"), p.stderr
    assert gitlab.requests == []
    assert read_bytes(cfg) == old
    cmd.assert_no_tokens(gitlab)


def test_token_echoed_by_gitlab_is_masked(gitlab, cmd, tmp_path):
    """Even a server that quotes the token back does not get it into the log."""
    runner = gitlab.add_runner(token=new_token())
    gitlab.script(method="POST", path=r"/runners/verify$", status=400,
                  body={"message": {"token": [f"{runner.token} is not acceptable"]}})
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", "shell")
    assert p.returncode == 1
    err = last_line(p.stderr)
    assert err.startswith(f"ERROR: register: verifying the token with {gitlab.url}: 400")
    assert "is not acceptable" in err
    assert not cfg.exists()
    cmd.assert_no_tokens(gitlab)


def test_debug_log_has_no_tokens(gitlab, cmd, tmp_path):
    reg = new_registration_token()
    gitlab.registration_tokens.add(reg)
    runner = gitlab.add_runner(token=new_token())
    cfg = tmp_path / "config.toml"
    assert cmd("--debug", "register", "-n", "-c", cfg, "--url", gitlab.url, "-r", reg,
               "--executor", "shell").returncode == 0
    assert cmd("--debug", "register", "-n", "-c", cfg, "--url", gitlab.url, "-t",
               runner.token, "--executor", "shell").returncode == 0
    assert cmd("--debug", "--log-format", "json", "verify", "-c", cfg).returncode == 0
    assert cmd("--log-format", "text", "list", "-c", cfg).returncode == 0
    cmd.assert_no_tokens(gitlab)


# ---------------------------------------------------------------------------
# The legacy registration-token flow
# ---------------------------------------------------------------------------

DEPRECATION = "WARNING: registration tokens are deprecated by GitLab"


def test_register_legacy_sends_params_and_saves_issued_token(gitlab, cmd, tmp_path):
    reg = new_registration_token()
    gitlab.registration_tokens.add(reg)
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "-r", reg, "--executor", "shell",
                 "--description", "legacy-one", "--tag-list", "docker,linux",
                 "--locked=false", "--run-untagged", "--maximum-timeout", "3600",
                 "--access-level", "ref_protected", "--maintenance-note", "note")
    assert p.returncode == 0, p.stderr
    assert DEPRECATION in p.stderr

    reqs = gitlab.requests
    assert [(q.method, q.path) for q in reqs] == [("POST", "/api/v4/runners")]
    body = reqs[0].json()
    assert reqs[0].headers["Runner-Token"] == reg == body["token"]
    assert "Private-Token" not in reqs[0].headers
    assert body["description"] == "legacy-one"
    assert body["tag_list"] == "docker,linux"
    assert body["run_untagged"] is True
    assert body["locked"] is False
    assert body["paused"] is False
    assert body["maximum_timeout"] == 3600
    assert body["access_level"] == "ref_protected"
    assert body["maintenance_note"] == "note"
    assert isinstance(body["info"], dict)
    assert "system_id" not in body

    (runner,) = gitlab.runners.values()
    assert runner.tag_list == ["docker", "linux"]
    entry = read_toml(cfg)["runners"][0]
    assert (entry["name"], entry["id"], entry["token"]) == ("legacy-one", runner.id,
                                                           runner.token)
    assert entry["token"] != reg
    assert entry["token_expires_at"] == toml_time(ZERO_TIME)
    cmd.assert_no_tokens(gitlab)


def test_register_legacy_defaults(gitlab, cmd, tmp_path):
    """run_untagged, locked, paused are always sent: true, true, false by default."""
    reg = new_registration_token()
    gitlab.registration_tokens.add(reg)
    gitlab.token_expires_in = 3600
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "--registration-token", reg, "--executor", "shell")
    assert p.returncode == 0, p.stderr
    body = gitlab.requests[0].json()
    assert (body["run_untagged"], body["locked"], body["paused"]) == (True, True, False)
    for absent in ("tag_list", "maximum_timeout", "access_level", "maintenance_note"):
        assert absent not in body
    (runner,) = gitlab.runners.values()
    entry = read_toml(cfg)["runners"][0]
    expected = toml_time(runner.token_expires_at)
    assert abs(entry["token_expires_at"] - expected) < timedelta(seconds=1)
    cmd.assert_no_tokens(gitlab)


def test_register_legacy_gone_says_use_token(gitlab, cmd, tmp_path):
    reg = new_registration_token()
    gitlab.registration_tokens.add(reg)
    gitlab.legacy_registration_disabled = True
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "-r", reg, "--executor", "shell")
    assert p.returncode == 1
    err = last_line(p.stderr)
    assert err.startswith(f"ERROR: register: registering the runner with {gitlab.url}: 410")
    assert "--token glrt-" in err
    assert [q.response_status for q in gitlab.requests] == [410]
    assert not cfg.exists()
    assert gitlab.runners == {}
    cmd.assert_no_tokens(gitlab)


def test_register_legacy_unknown_registration_token(gitlab, cmd, tmp_path):
    gitlab.registration_tokens.add(new_registration_token())
    wrong = new_registration_token()
    cmd.secret(wrong)
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "-r", wrong, "--executor", "shell")
    assert p.returncode == 1
    err = last_line(p.stderr)
    assert err.startswith(f"ERROR: register: registering the runner with {gitlab.url}: 403")
    assert "check the registration token" in err
    assert [q.response_status for q in gitlab.requests] == [403]
    assert not cfg.exists()
    assert os.listdir(tmp_path) == []
    cmd.assert_no_tokens(gitlab)


@pytest.mark.parametrize("flag", [["--tag-list", "x"], ["--run-untagged"], ["--locked=false"],
                                  ["--access-level", "ref_protected"],
                                  ["--maximum-timeout", "60"], ["--paused"],
                                  ["--maintenance-note", "n"]])
def test_register_glrt_with_legacy_only_flag_is_refused(gitlab, cmd, tmp_path, flag):
    runner = gitlab.add_runner(token=new_token())
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", "shell", *flag)
    assert p.returncode == 1
    name = flag[0].split("=")[0]
    assert last_line(p.stderr).startswith(
        f"ERROR: register: {name} cannot be used with an authentication token")
    assert gitlab.requests == []
    assert not cfg.exists()
    cmd.assert_no_tokens(gitlab)


def test_register_glrt_given_as_registration_token_ignores_legacy_flags(gitlab, cmd,
                                                                         tmp_path):
    runner = gitlab.add_runner(token=new_token(), id=9)
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "-r", runner.token, "--executor", "shell",
                 "--tag-list", "x")
    assert p.returncode == 0, p.stderr
    assert re.search(r"^WARNING: .*--tag-list .*ignored", p.stderr, re.M), p.stderr
    assert DEPRECATION not in p.stderr
    assert [(q.method, q.path) for q in gitlab.requests] == [
        ("POST", "/api/v4/runners/verify")]
    assert "tag_list" not in gitlab.requests[0].json()
    assert read_toml(cfg)["runners"][0]["token"] == runner.token
    cmd.assert_no_tokens(gitlab)


# ---------------------------------------------------------------------------
# Failures: nothing written, the old file intact
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("url", ["ftp://x", "not a url", ""])
def test_register_bad_url(gitlab, cmd, tmp_path, url):
    runner = gitlab.add_runner(token=new_token())
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, url, "--token", runner.token, "--executor", "shell")
    assert p.returncode == 1
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("ERROR:")]
    assert len(errors) == 1, p.stderr
    if url:
        assert errors[0] == (f"ERROR: register: verifying the token with {url}: only http "
                             f'or https URLs are supported, not "{url}"')
    else:
        assert errors[0].startswith("ERROR: register: the GitLab URL (--url) is needed")
    assert not cfg.exists()
    # Only the system id may have been made (gitlab-runner makes it on load too).
    assert set(os.listdir(tmp_path)) <= {".runner_system_id"}
    assert gitlab.requests == []
    cmd.assert_no_tokens(gitlab)


def test_register_bad_url_legacy(gitlab, cmd, tmp_path):
    reg = new_registration_token()
    gitlab.registration_tokens.add(reg)
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, "ftp://x", "-r", reg, "--executor", "shell")
    assert p.returncode == 1
    assert last_line(p.stderr) == ('ERROR: register: registering the runner with ftp://x: '
                                   'only http or https URLs are supported, not "ftp://x"')
    assert os.listdir(tmp_path) == []
    cmd.assert_no_tokens(gitlab)


def test_register_unreachable_host(cmd, tmp_path):
    token = new_token()
    cmd.secret(token)
    cfg = tmp_path / "config.toml"
    old = write_config(cfg)
    t0 = time.monotonic()
    p = register(cmd, cfg, "http://127.0.0.1:1", "--token", token, "--executor", "shell",
                 timeout=45)
    elapsed = time.monotonic() - t0
    assert p.returncode == 1
    assert elapsed < 30, elapsed
    err = last_line(p.stderr)
    assert err.startswith("ERROR: register: verifying the token with http://127.0.0.1:1: ")
    assert "connect" in err.lower(), err
    # It was retried (protocol.md 8.1: transport errors are), then given up.
    assert "attempt 2/" in p.stderr, p.stderr
    assert read_bytes(cfg) == old
    cmd.assert_no_tokens()


def test_register_wrong_token_keeps_config(gitlab, cmd, tmp_path):
    known = gitlab.add_runner(token=new_token(), id=3)
    cfg = tmp_path / "config.toml"
    old = write_config(cfg, runner_entry(gitlab.url, known.token, "existing", id=3))
    wrong = new_token()
    cmd.secret(wrong)
    p = register(cmd, cfg, gitlab.url, "--token", wrong, "--executor", "shell")
    assert p.returncode == 1
    err = last_line(p.stderr)
    assert err.startswith(f"ERROR: register: verifying the token with {gitlab.url}: 403")
    assert "wrong, expired or revoked" in err
    assert read_bytes(cfg) == old
    assert [q.response_status for q in gitlab.requests] == [403]
    cmd.assert_no_tokens(gitlab)


def test_register_expired_token_is_refused(gitlab, cmd, tmp_path):
    past = datetime.now(timezone.utc) - timedelta(hours=1)
    runner = gitlab.add_runner(token=new_token(), expires_at=past)
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", "shell")
    assert p.returncode == 1
    assert "wrong, expired or revoked" in last_line(p.stderr)
    assert not cfg.exists()
    cmd.assert_no_tokens(gitlab)


@pytest.fixture
def readonly_dir(tmp_path):
    """(directory, prefix): a directory the command cannot write, and how to run it.

    As root the command runs as nobody (setpriv) on a root-owned 0555
    directory; otherwise chmod 0555 is enough.  The directory holds a
    config.toml everyone can read.
    """
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root needs setpriv (util-linux) to drop privileges")
        top = tempfile.mkdtemp(prefix="runner-ro-")
        os.chmod(top, 0o755)
        d = os.path.join(top, "etc")
        prefix = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
    else:
        top = None
        d = str(tmp_path / "etc")
        prefix = ()
    os.mkdir(d)
    try:
        yield d, prefix
    finally:
        os.chmod(d, 0o755)
        if top is not None:
            shutil.rmtree(top, ignore_errors=True)


def _make_readonly(d, cfg_bytes):
    path = os.path.join(d, "config.toml")
    with open(path, "wb") as f:
        f.write(cfg_bytes)
    os.chmod(path, 0o644)
    os.chmod(d, 0o555)
    return path


def test_register_config_cannot_be_written_glrt(gitlab, cmd, readonly_dir):
    d, prefix = readonly_dir
    known = gitlab.add_runner(token=new_token(), id=3)
    runner = gitlab.add_runner(token=new_token(), id=4)
    old = ("concurrent = 2\n\n" + runner_entry(gitlab.url, known.token, "existing", 3)).encode()
    cfg = _make_readonly(d, old)
    p = cmd("register", "-n", "-c", cfg, "--url", gitlab.url, "--token", runner.token,
            "--executor", "shell", prefix=prefix)
    assert p.returncode == 1, p.stderr
    err = last_line(p.stderr)
    assert err.startswith(f"ERROR: register: cannot save {cfg}: "), err
    assert "Permission denied" in err
    assert "the file was left as it was" in err
    # The system id cannot be written either: a warning, not the failure.
    assert re.search(r"^WARNING: cannot write .*\.runner_system_id \(Permission denied\)",
                     p.stderr, re.M), p.stderr
    assert read_bytes(cfg) == old
    assert sorted(os.listdir(d)) == ["config.toml"]
    # A glrt- runner was only verified: nothing to undo in GitLab.
    assert [q.method for q in gitlab.requests] == ["POST"]
    cmd.assert_no_tokens(gitlab)


def test_register_config_cannot_be_written_legacy_unregisters(gitlab, cmd, readonly_dir):
    d, prefix = readonly_dir
    reg = new_registration_token()
    gitlab.registration_tokens.add(reg)
    old = b"concurrent = 2\nlisten_address = \"127.0.0.1:9252\"\n"
    cfg = _make_readonly(d, old)
    p = cmd("register", "-n", "-c", cfg, "--url", gitlab.url, "-r", reg,
            "--executor", "shell", prefix=prefix)
    assert p.returncode == 1, p.stderr
    err = [ln for ln in p.stderr.splitlines() if ln.startswith("ERROR:")]
    assert len(err) == 1 and err[0].startswith(f"ERROR: register: cannot save {cfg}: ")
    assert "Permission denied" in err[0]
    assert "deleted from GitLab again" in p.stderr
    assert read_bytes(cfg) == old
    assert sorted(os.listdir(d)) == ["config.toml"]
    post, delete = gitlab.requests
    issued = json.loads(post.response_body)["token"]
    assert (delete.method, delete.path) == ("DELETE", "/api/v4/runners")
    assert delete.json() == {"token": issued}
    assert delete.headers["Runner-Token"] == issued
    assert delete.response_status == 204
    assert gitlab.runners == {}
    cmd.assert_no_tokens(gitlab)


def test_register_config_cannot_be_written_leave_runner(gitlab, cmd, readonly_dir):
    d, prefix = readonly_dir
    reg = new_registration_token()
    gitlab.registration_tokens.add(reg)
    cfg = _make_readonly(d, b"concurrent = 2\n")
    p = cmd("register", "-n", "-c", cfg, "--url", gitlab.url, "-r", reg,
            "--executor", "shell", "--leave-runner", prefix=prefix)
    assert p.returncode == 1, p.stderr
    assert "--leave-runner" in p.stderr
    assert [q.method for q in gitlab.requests] == ["POST"]
    assert len(gitlab.runners) == 1
    assert read_bytes(cfg) == b"concurrent = 2\n"
    cmd.assert_no_tokens(gitlab)


def test_register_creates_missing_config_dir(gitlab, cmd, tmp_path):
    """As gitlab-runner: the directories are made (0700), then the file."""
    reg = new_registration_token()
    gitlab.registration_tokens.add(reg)
    cfg = tmp_path / "no" / "such" / "config.toml"
    p = register(cmd, cfg, gitlab.url, "-r", reg, "--executor", "shell")
    assert p.returncode == 0, p.stderr
    (runner,) = gitlab.runners.values()
    assert read_toml(cfg)["runners"][0]["token"] == runner.token
    assert stat.S_IMODE(os.stat(tmp_path / "no").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(cfg).st_mode) == 0o600
    cmd.assert_no_tokens(gitlab)


# ---------------------------------------------------------------------------
# Ctrl-C
# ---------------------------------------------------------------------------

def test_register_sigint_after_legacy_registration_unregisters(gitlab, cmd, tmp_path):
    reg = new_registration_token()
    gitlab.registration_tokens.add(reg)
    gitlab.script(method="POST", path=r"/runners$", delay=2.0)
    cfg = tmp_path / "config.toml"
    proc = cmd.start("register", "-n", "-c", cfg, "--url", gitlab.url, "-r", reg,
                     "--executor", "shell")
    try:
        gitlab.wait_for(lambda: gitlab.requests_for("POST", r"/runners$"), timeout=10)
        proc.send_signal(signal.SIGINT)
        rc, out, err = cmd.finish(proc)
    finally:
        proc.kill()
    assert rc != 0
    assert "ERROR: register: interrupted; nothing was written" in err
    assert not cfg.exists()
    post = gitlab.requests_for("POST", r"/runners$")[0]
    issued = json.loads(post.response_body)["token"]
    deletes = gitlab.requests_for("DELETE", r"/runners$")
    assert len(deletes) == 1
    assert deletes[0].json() == {"token": issued}
    assert deletes[0].response_status == 204
    assert gitlab.runners == {}
    cmd.assert_no_tokens(gitlab)


def test_register_second_sigint_exits_at_once(gitlab, cmd, tmp_path):
    reg = new_registration_token()
    gitlab.registration_tokens.add(reg)
    gitlab.script(method="POST", path=r"/runners$", delay=5.0)
    cfg = tmp_path / "config.toml"
    proc = cmd.start("register", "-n", "-c", cfg, "--url", gitlab.url, "-r", reg,
                     "--executor", "shell")
    try:
        gitlab.wait_for(lambda: gitlab.requests_for("POST", r"/runners$"), timeout=10)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        # The first one is acknowledged (a warning) before the second is sent.
        cmd.wait_stderr(proc, "WARNING: interrupted: finishing what was started")
        proc.send_signal(signal.SIGINT)
        rc, out, err = cmd.finish(proc)
        elapsed = time.monotonic() - t0
    finally:
        proc.kill()
    assert rc == 130
    assert elapsed < 3, elapsed
    assert "interrupted again, exiting now" in err
    assert not cfg.exists()
    cmd.assert_no_tokens(gitlab)


def test_register_sigint_during_glrt_verify_writes_nothing(gitlab, cmd, tmp_path):
    runner = gitlab.add_runner(token=new_token())
    gitlab.script(method="POST", path=r"/runners/verify$", delay=1.0)
    cfg = tmp_path / "config.toml"
    proc = cmd.start("register", "-n", "-c", cfg, "--url", gitlab.url, "--token",
                     runner.token, "--executor", "shell")
    try:
        gitlab.wait_for(lambda: gitlab.requests_for("POST", r"/runners/verify$"), timeout=10)
        proc.send_signal(signal.SIGINT)
        rc, out, err = cmd.finish(proc)
    finally:
        proc.kill()
    assert rc != 0
    assert not cfg.exists()
    # Nothing was created: nothing to delete.
    assert gitlab.requests_for("DELETE", ".*") == []
    cmd.assert_no_tokens(gitlab)


# ---------------------------------------------------------------------------
# Interactive
# ---------------------------------------------------------------------------

def _drive_pty(argv, answers, timeout=15):
    """Run argv on a pseudo-terminal (echo off); answer each prompt; return (rc, output)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: no echo, so the output is only what the runner prints
        try:
            attrs = termios.tcgetattr(0)
            attrs[3] &= ~termios.ECHO
            termios.tcsetattr(0, termios.TCSANOW, attrs)
            os.execve(argv[0], argv, runner_env())
        finally:
            os._exit(127)
    buf = b""       # what has not been matched against a prompt yet
    seen = b""      # everything
    deadline = time.monotonic() + timeout

    def read_more():
        nonlocal buf, seen
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(seen.decode(errors="replace"))
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return True
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            return False
        buf += chunk
        seen += chunk
        return bool(chunk)

    try:
        for prompt, answer in answers:
            while prompt.encode() not in buf:
                if not read_more():
                    raise AssertionError(f"no prompt {prompt!r}; output:\n{seen.decode()}")
            os.write(fd, answer.encode() + b"\n")
            buf = b""   # the next prompt must come after this answer
        while read_more():
            pass
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), seen.decode(errors="replace")


def test_register_interactive_prompts(gitlab, cmd, tmp_path):
    runner = gitlab.add_runner(token=new_token(), id=808)
    cfg = tmp_path / "config.toml"
    rc, out = _drive_pty([RUNNER, "register", "-c", str(cfg)], [
        ("Enter the GitLab instance URL", gitlab.url),
        ("Enter the registration token", runner.token),
        ("Enter a name for the runner", "typed-name"),
        ("Enter an executor", "shell"),
    ])
    cmd.add_output(out)
    assert rc == 0, out
    assert "Runner registered successfully" in out
    entry = read_toml(cfg)["runners"][0]
    assert (entry["name"], entry["url"], entry["token"], entry["executor"], entry["id"]) == \
        ("typed-name", gitlab.url, runner.token, "shell", 808)
    cmd.assert_no_tokens(gitlab)


def test_register_interactive_asks_only_for_what_is_missing(gitlab, cmd, tmp_path):
    reg = new_registration_token()
    gitlab.registration_tokens.add(reg)
    cfg = tmp_path / "config.toml"
    rc, out = _drive_pty([RUNNER, "register", "-c", str(cfg), "--url", gitlab.url,
                          "--executor", "shell"], [
        ("Enter the registration token", reg),
        ("Enter a description for the runner", "typed-description"),
        # gitlab-runner asks these two too; empty answers are fine.
        ("Enter tags for the runner", ""),
        ("Enter optional maintenance note", ""),
    ])
    cmd.add_output(out)
    assert rc == 0, out
    assert "GitLab instance URL" not in out
    assert "Enter an executor" not in out
    assert gitlab.requests[0].json()["description"] == "typed-description"
    entry = read_toml(cfg)["runners"][0]
    assert entry["name"] == "typed-description"
    cmd.assert_no_tokens(gitlab)


def test_register_no_terminal_and_no_url_is_an_error(cmd, tmp_path):
    token = new_token()
    cmd.secret(token)
    cfg = tmp_path / "config.toml"
    p = cmd("register", "-c", cfg, "--token", token, "--executor", "shell", input="")
    assert p.returncode == 1
    assert last_line(p.stderr).startswith("ERROR: register: the GitLab URL (--url) is needed")
    assert not cfg.exists()
    cmd.assert_no_tokens()


# ---------------------------------------------------------------------------
# gitlab-runner's flags that are config.toml keys (register_flags.def), ported
# from its commands/register_integration_test.go
# ---------------------------------------------------------------------------

def test_register_feature_flags_are_written(gitlab, cmd, tmp_path):
    # TestRegisterCommand "feature flags are included in config"
    runner = gitlab.add_runner(token=new_token(), id=12345)
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", "shell",
                 "--name", "test-runner", "--feature-flags", "FF_TEST_1:true",
                 "--feature-flags", "FF_TEST_2:false")
    assert p.returncode == 0, p.stderr
    text = cfg.read_text()
    assert "  [runners.feature_flags]\n    FF_TEST_1 = true\n    FF_TEST_2 = false\n" in text
    cmd.assert_no_tokens(gitlab)


def test_register_kubernetes_security_context_from_the_environment(gitlab, cmd, tmp_path):
    # TestRegisterCommand "kubernetes security context namespace"
    runner = gitlab.add_runner(token=new_token(), id=12345)
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", "kubernetes",
                 env={"KUBERNETES_BUILD_CONTAINER_SECURITY_CONTEXT_PRIVILEGED": "true",
                      "KUBERNETES_HELPER_CONTAINER_SECURITY_CONTEXT_RUN_AS_USER": "1000",
                      "KUBERNETES_SERVICE_CONTAINER_SECURITY_CONTEXT_RUN_AS_NON_ROOT": "true",
                      "KUBERNETES_SERVICE_CONTAINER_SECURITY_CONTEXT_CAPABILITIES_ADD":
                          "NET_RAW, NET_RAW1"})
    assert p.returncode == 0, p.stderr
    k = read_toml(cfg)["runners"][0]["kubernetes"]
    assert k["build_container_security_context"] == {"privileged": True}
    assert k["helper_container_security_context"] == {"run_as_user": 1000}
    assert k["service_container_security_context"]["run_as_non_root"] is True
    assert k["service_container_security_context"]["capabilities"] == \
        {"add": ["NET_RAW, NET_RAW1"]}
    # Kept for gitlab-runner; this build names what it cannot run.
    out = cmd("list", "-c", cfg)
    assert re.search(r'executor "kubernetes" is not supported by this build', out.stderr), \
        out.stderr
    cmd.assert_no_tokens(gitlab)


@pytest.mark.parametrize("how", ["flag", "env"])
def test_register_s3_cache_authentication_type(gitlab, cmd, tmp_path, how):
    # TestRegisterCommand "s3 cache AuthenticationType arg" / "... env"
    runner = gitlab.add_runner(token=new_token(), id=12345)
    cfg = tmp_path / "config.toml"
    flags = ["--cache-s3-authentication_type=iam"] if how == "flag" else []
    env = {"CACHE_S3_AUTHENTICATION_TYPE": "iam"} if how == "env" else None
    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", "shell",
                 *flags, env=env)
    assert p.returncode == 0, p.stderr
    assert "    [runners.cache.s3]\n      AuthenticationType = \"iam\"\n" in cfg.read_text()
    cmd.assert_no_tokens(gitlab)


def test_register_writes_gitlab_runners_keys_in_its_order(gitlab, cmd, tmp_path):
    runner = gitlab.add_runner(token=new_token(), id=7)
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", "shell",
                 "--name", "n", "--limit", "2", "--unhealthy-requests-limit", "5",
                 "--unhealthy-interval", "90m", "--job-status-final-update-retry-limit", "3",
                 "--cache-type", "s3", "--cache-shared", "--cache-s3-server-address",
                 "s3.example.com", "--cache-s3-bucket-name", "b",
                 "--docker-image", "dropped:for-shell")
    assert p.returncode == 0, p.stderr
    text = cfg.read_text()
    entry = text[text.index("[[runners]]"):]
    assert entry.startswith(
        '[[runners]]\n  name = "n"\n  limit = 2\n  unhealthy_requests_limit = 5\n'
        '  unhealthy_interval = "1h30m0s"\n  job_status_final_update_retry_limit = 3\n'
        f'  url = "{gitlab.url}"\n  id = 7\n'), entry
    assert ('  [runners.cache]\n    Type = "s3"\n    Shared = true\n'
            '    MaxUploadedArchiveSize = 0\n    [runners.cache.s3]\n'
            '      ServerAddress = "s3.example.com"\n      BucketName = "b"\n'
            '      AssumeRoleMaxConcurrency = 0\n    [runners.cache.gcs]\n'
            '    [runners.cache.azure]\n') in entry, entry
    # gitlab-runner keeps only the chosen executor's table.
    assert "docker" not in entry
    # The remote cache is named once by list, and once by run at start.
    out = cmd("list", "-c", cfg)
    lines = [ln for ln in out.stderr.splitlines() if 'cache Type "s3"' in ln]
    assert len(lines) == 1 and "not supported by this build" in lines[0], out.stderr
    cmd.assert_no_tokens(gitlab)


def test_register_docker_keeps_its_table_and_adds_the_cache_volume(gitlab, cmd, tmp_path):
    # askDocker: the image is needed; /cache is added to the volumes.
    runner = gitlab.add_runner(token=new_token(), id=7)
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", "docker",
                 "--docker-image", "busybox:latest", "--docker-privileged",
                 "--docker-volumes", "/x:/y")
    assert p.returncode == 0, p.stderr
    d = read_toml(cfg)["runners"][0]["docker"]
    assert (d["image"], d["privileged"], d["volumes"]) == \
        ("busybox:latest", True, ["/x:/y", "/cache"])
    assert (d["shm_size"], d["network_mtu"]) == (0, 0)
    # The table register wrote reads back without a warning.
    out = cmd("list", "-c", cfg)
    assert out.returncode == 0 and "not supported" not in out.stderr \
        and "unknown key" not in out.stderr, out.stderr
    cmd.assert_no_tokens(gitlab)


def test_register_docker_engine_flags(gitlab, cmd, tmp_path):
    # DockerCredentials: host, tls_cert_path, tls_verify come first in the table.
    runner = gitlab.add_runner(token=new_token())
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", "docker",
                 "--docker-image", "busybox", "--docker-host", "tcp://127.0.0.1:2376",
                 "--docker-cert-path", "/etc/certs", "--docker-tlsverify")
    assert p.returncode == 0, p.stderr
    d = read_toml(cfg)["runners"][0]["docker"]
    assert (d["host"], d["tls_cert_path"], d["tls_verify"]) == \
        ("tcp://127.0.0.1:2376", "/etc/certs", True)
    assert list(d)[:3] == ["host", "tls_cert_path", "tls_verify"]
    cmd.assert_no_tokens(gitlab)


def test_register_docker_without_an_image_is_refused(gitlab, cmd, tmp_path):
    runner = gitlab.add_runner(token=new_token())
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", "docker")
    assert p.returncode == 1
    assert "--docker-image is needed" in last_line(p.stderr), p.stderr
    assert not cfg.exists() and gitlab.requests == []
    cmd.assert_no_tokens(gitlab)


def test_register_custom_executor_flags(gitlab, cmd, tmp_path):
    runner = gitlab.add_runner(token=new_token())
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", "custom",
                 "--custom-run-exec", "/d/run", "--custom-prepare-exec", "/d/prep")
    assert p.returncode == 0, p.stderr
    assert read_toml(cfg)["runners"][0]["custom"] == \
        {"prepare_exec": "/d/prep", "run_exec": "/d/run"}
    cmd.assert_no_tokens(gitlab)


@pytest.mark.parametrize("executor", ["foo", "Shell", "docker-ssh"])
def test_register_unknown_executor_is_refused(gitlab, cmd, tmp_path, executor):
    runner = gitlab.add_runner(token=new_token())
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", executor)
    assert p.returncode == 1
    assert "Invalid executor specified" in last_line(p.stderr)
    assert not cfg.exists() and gitlab.requests == []
    cmd.assert_no_tokens(gitlab)


def test_register_bad_flag_value_is_refused(gitlab, cmd, tmp_path):
    runner = gitlab.add_runner(token=new_token())
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "--token", runner.token, "--executor", "shell",
                 "--feature-flags", "FF_X")
    assert p.returncode == 2
    assert "is not KEY:VALUE" in p.stderr
    assert not cfg.exists() and gitlab.requests == []
    cmd.assert_no_tokens(gitlab)


def test_register_access_level_is_checked(gitlab, cmd, tmp_path):
    # TestAccessLevelSetting: anything but not_protected / ref_protected fails.
    reg = new_registration_token()
    gitlab.registration_tokens.add(reg)
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "-r", reg, "--executor", "shell",
                 "--access-level", "invalid_level")
    assert p.returncode == 1
    assert "access-level" in last_line(p.stderr)
    assert gitlab.requests == []
    cmd.assert_no_tokens(gitlab)


TEMPLATE = """
[[runners]]
  limit = 9
  [runners.custom_build_dir]
    enabled = false
  [runners.kubernetes]
    [runners.kubernetes.volumes]
      [[runners.kubernetes.volumes.empty_dir]]
        name = "empty_dir"
        mount_path = "/path/to/empty_dir"
"""


def test_register_template_config_is_merged(gitlab, cmd, tmp_path):
    # TestExecute_MergeConfigTemplate "successful config template merge"
    reg = new_registration_token()
    gitlab.registration_tokens.add(reg)
    tpl = tmp_path / "tpl.toml"
    tpl.write_text(TEMPLATE)
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "-r", reg, "--executor", "shell", "--shell", "sh",
                 "--limit", "2", "--template-config", tpl)
    assert p.returncode == 0, p.stderr
    text = cfg.read_text()
    entry = text[text.index("[[runners]]"):]
    assert '  executor = "shell"\n  shell = "sh"\n  [runners.custom_build_dir]\n' \
        '    enabled = false\n  [runners.cache]\n' in entry, entry
    # The flags win; the kubernetes table goes with a shell executor.
    assert "limit = 2" in entry and "kubernetes" not in entry
    cmd.assert_no_tokens(gitlab)


@pytest.mark.parametrize("content", ["- , ;", "concurrent = 1\n"])
def test_register_bad_template_config_is_refused(gitlab, cmd, tmp_path, content):
    # "incorrect config template merge"; and a template needs one [[runners]].
    reg = new_registration_token()
    gitlab.registration_tokens.add(reg)
    tpl = tmp_path / "tpl.toml"
    tpl.write_text(content)
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab.url, "-r", reg, "--executor", "shell",
                 "--template-config", tpl)
    assert p.returncode == 1
    assert "template" in last_line(p.stderr)
    assert not cfg.exists() and gitlab.requests == []
    cmd.assert_no_tokens(gitlab)


def test_register_interactive_legacy_asks_in_gitlab_runners_order(gitlab, cmd, tmp_path):
    # askRunner + doLegacyRegisterRunner + askExecutor: description, tags,
    # maintenance note, then the executor, asked again until it is known.
    reg = new_registration_token()
    gitlab.registration_tokens.add(reg)
    cfg = tmp_path / "config.toml"
    rc, out = _drive_pty([RUNNER, "register", "-c", str(cfg)], [
        ("Enter the GitLab instance URL", gitlab.url),
        ("Enter the registration token", reg),
        ("Enter a description for the runner", "desc"),
        ("Enter tags for the runner (comma-separated)", "a,b"),
        ("Enter optional maintenance note for the runner", "note"),
        ("Enter an executor: ", "nope"),
        ("Enter an executor: ", "docker"),
        ("Enter the default Docker image", "alpine:3"),
    ])
    cmd.add_output(out)
    assert rc == 0, out
    assert "Invalid executor specified" in out
    assert out.index("Enter a description") < out.index("Enter tags") < \
        out.index("Enter optional maintenance note") < out.index("Enter an executor")
    body = gitlab.requests[0].json()
    assert (body["description"], body["tag_list"], body["maintenance_note"]) == \
        ("desc", "a,b", "note")
    entry = read_toml(cfg)["runners"][0]
    assert (entry["executor"], entry["docker"]["image"]) == ("docker", "alpine:3")
    cmd.assert_no_tokens(gitlab)
