"""`runner verify`, `runner unregister` and `runner reset-token` against the
GitLab double (protocol.md 2.3-2.6), and where every token goes (1.3).

Uses the helpers and the `cmd` fixture of test_register.py: every test
ends with cmd.assert_no_tokens(...).
"""
import re
import signal
import time
from datetime import datetime, timedelta, timezone

import pytest

from test_register import (ZERO_TIME, _make_readonly, cmd, last_line,  # noqa: F401
                           new_registration_token, new_token, read_bytes, read_toml,
                           readonly_dir, register, runner_entry, toml_time, write_config)

SID = "s_0123456789ab"


@pytest.fixture
def cfgdir(tmp_path):
    """A config directory with a known .runner_system_id."""
    (tmp_path / ".runner_system_id").write_text(SID + "\n")
    return tmp_path


def error_lines(text):
    return [ln for ln in text.splitlines() if ln.startswith("ERROR:")]


# ---------------------------------------------------------------------------
# verify
# ---------------------------------------------------------------------------

def test_verify_all_valid(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(), id=1)
    b = gitlab.add_runner(token=new_token(prefix=""), id=2)
    cfg = cfgdir / "config.toml"
    old = write_config(cfg, runner_entry(gitlab.url, a.token, "alpha", 1),
                       runner_entry(gitlab.url, b.token, "legacy", 2))
    p = cmd("verify", "-c", cfg)
    assert p.returncode == 0, p.stderr
    assert f'Verifying runner... is valid: runner "alpha" ({cfg}:4)' in p.stderr
    assert f'Verifying runner... is alive: runner "legacy" ({cfg}:13)' in p.stderr
    assert error_lines(p.stderr) == []
    assert read_bytes(cfg) == old

    reqs = gitlab.requests
    assert sorted(q.json()["token"] for q in reqs) == sorted([a.token, b.token])
    for q in reqs:
        assert (q.method, q.path) == ("POST", "/api/v4/runners/verify")
        body = q.json()
        assert q.headers["Runner-Token"] == body["token"]
        assert body["system_id"] == SID
        assert body["info"]["executor"] == "shell"
        assert "Private-Token" not in q.headers
    assert a.system_ids == {SID} and b.system_ids == {SID}
    cmd.assert_no_tokens(gitlab)


def test_verify_revoked_token_names_the_runner(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(), id=1)
    revoked = new_token()
    cmd.secret(revoked)
    cfg = cfgdir / "config.toml"
    old = write_config(cfg, runner_entry(gitlab.url, a.token, "alpha", 1),
                       runner_entry(gitlab.url, revoked, "gone-one", 2))
    p = cmd("verify", "-c", cfg)
    assert p.returncode == 1
    (err,) = error_lines(p.stderr)
    assert err.startswith(f'ERROR: runner "gone-one" ({cfg}:13): the token is not valid')
    assert "expired or been revoked" in err
    assert "runner register" in err and "reset-token" in err
    assert 'is valid: runner "alpha"' in p.stderr
    assert read_bytes(cfg) == old
    cmd.assert_no_tokens(gitlab)


def test_verify_expired_token_is_reported(gitlab, cmd, cfgdir):
    past = datetime.now(timezone.utc) - timedelta(minutes=5)
    a = gitlab.add_runner(token=new_token(), id=1, expires_at=past)
    cfg = cfgdir / "config.toml"
    write_config(cfg, runner_entry(gitlab.url, a.token, "stale", 1))
    p = cmd("verify", "-c", cfg)
    assert p.returncode == 1
    (err,) = error_lines(p.stderr)
    assert err.startswith(f'ERROR: runner "stale" ({cfg}:4): the token is not valid')
    cmd.assert_no_tokens(gitlab)


def test_verify_delete_removes_exactly_the_revoked_entry(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(), id=1)
    b = gitlab.add_runner(token=new_token(), id=3)
    revoked = new_token()
    cmd.secret(revoked)
    cfg = cfgdir / "config.toml"
    write_config(cfg, runner_entry(gitlab.url, a.token, "alpha", 1,
                                   extra='  frobnicate = "kept"\n  [runners.extra]\n    x = 1\n'),
                 runner_entry(gitlab.url, revoked, "gone-one", 2),
                 runner_entry(gitlab.url, b.token, "gamma", 3),
                 globals_='concurrent = 4\nunknown_global = "kept too"\n\n'
                          '[session_server]\n  session_timeout = 1800\n')
    before = read_toml(cfg)
    p = cmd("verify", "--delete", "-c", cfg)
    assert p.returncode == 0, p.stderr
    assert f"Updated {cfg}" in p.stderr
    assert 'runner "gone-one"' in p.stderr
    after = read_toml(cfg)
    assert after["runners"] == [before["runners"][0], before["runners"][2]]
    before.pop("runners"), after.pop("runners")
    assert after == before
    assert after["unknown_global"] == "kept too"
    cmd.assert_no_tokens(gitlab)


def test_verify_delete_keeps_entries_that_failed_otherwise(gitlab, cmd, cfgdir):
    """Only a 403 means GitLab does not know the runner; a 500 removes nothing."""
    a = gitlab.add_runner(token=new_token(), id=1)
    gitlab.script(method="POST", path=r"/runners/verify$", status=500, times=None)
    cfg = cfgdir / "config.toml"
    old = write_config(cfg, runner_entry(gitlab.url, a.token, "alpha", 1))
    p = cmd("verify", "--delete", "-c", cfg)
    assert p.returncode == 1
    (err,) = error_lines(p.stderr)
    assert err.startswith(f'ERROR: runner "alpha" ({cfg}:4): verifying failed: 500')
    assert read_bytes(cfg) == old
    cmd.assert_no_tokens(gitlab)


def test_verify_skips_entries_with_a_problem(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(), id=1)
    kube, ftp = new_token(), new_token()
    cmd.secret(kube, ftp)
    cfg = cfgdir / "config.toml"
    old = write_config(cfg, runner_entry(gitlab.url, a.token, "alpha", 1),
                       runner_entry(gitlab.url, kube, "kube", 2).replace(
                           'executor = "shell"', 'executor = "kubernetes"'),
                       runner_entry("ftp://example.com", ftp, "ftp-one", 3))
    p = cmd("verify", "--delete", "-c", cfg)
    assert p.returncode == 1
    assert re.search(rf'^WARNING: runner "kube" \({re.escape(str(cfg))}:13\): skipped: '
                     r'executor "kubernetes"', p.stderr, re.M), p.stderr
    assert re.search(rf'^WARNING: runner "ftp-one" \({re.escape(str(cfg))}:22\): skipped: '
                     r'url ', p.stderr, re.M), p.stderr
    assert 'is valid: runner "alpha"' in p.stderr
    assert [q.json()["token"] for q in gitlab.requests] == [a.token]
    assert read_bytes(cfg) == old  # skipped entries are not deleted
    cmd.assert_no_tokens(gitlab)


def test_verify_one_by_name(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(), id=1)
    b = gitlab.add_runner(token=new_token(), id=2)
    cfg = cfgdir / "config.toml"
    write_config(cfg, runner_entry(gitlab.url, a.token, "alpha", 1),
                 runner_entry(gitlab.url, b.token, "beta", 2))
    p = cmd("verify", "-c", cfg, "--name", "beta")
    assert p.returncode == 0, p.stderr
    assert [q.json()["token"] for q in gitlab.requests] == [b.token]
    p = cmd("verify", "-c", cfg, "--name", "nope")
    assert p.returncode == 1
    assert last_line(p.stderr) == f'ERROR: no runner named "nope" in {cfg}'
    assert len(gitlab.requests) == 1
    cmd.assert_no_tokens(gitlab)


def test_verify_runs_entries_concurrently(gitlab, cmd, cfgdir):
    runners = [gitlab.add_runner(token=new_token(), id=100 + i) for i in range(10)]
    gitlab.script(method="POST", path=r"/runners/verify$", delay=1.0, times=None)
    cfg = cfgdir / "config.toml"
    write_config(cfg, *(runner_entry(gitlab.url, r.token, f"r{i}", r.id)
                        for i, r in enumerate(runners)),
                 globals_="concurrent = 10\n")
    t0 = time.monotonic()
    p = cmd("verify", "-c", cfg)
    elapsed = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("Verifying runner... is valid") == 10
    assert elapsed < 4, f"10 verifies of 1 s each took {elapsed:.1f} s: not concurrent"
    times = [q.time for q in gitlab.requests]
    assert len(times) == 10
    # Every request arrived before the first one was answered: they overlapped.
    assert max(times) - min(times) < 1.0, times
    cmd.assert_no_tokens(gitlab)


# ---------------------------------------------------------------------------
# unregister
# ---------------------------------------------------------------------------

def test_unregister_glrt_by_name_deletes_this_manager(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(), id=11)
    keep = gitlab.add_runner(token=new_token(), id=12)
    cfg = cfgdir / "config.toml"
    assert register(cmd, cfg, gitlab.url, "-t", a.token, "--executor", "shell",
                    "--name", "alpha").returncode == 0
    assert register(cmd, cfg, gitlab.url, "-t", keep.token, "--executor", "shell",
                    "--name", "keep").returncode == 0
    assert a.system_ids == {SID}
    before = read_toml(cfg)

    p = cmd("unregister", "-c", cfg, "--name", "alpha")
    assert p.returncode == 0, p.stderr
    assert 'Unregistering runner from GitLab succeeded: runner "alpha"' in p.stderr
    assert f"Updated {cfg}" in p.stderr
    (q,) = gitlab.requests_for("DELETE", ".*")
    assert q.path == "/api/v4/runners/managers"
    assert q.json() == {"token": a.token, "system_id": SID}
    assert q.headers["Runner-Token"] == a.token
    assert "Private-Token" not in q.headers
    assert q.response_status == 204
    # Only the manager goes: the runner stays in GitLab.
    assert gitlab.runners[11].system_ids == set()
    after = read_toml(cfg)
    assert after["runners"] == before["runners"][1:]
    cmd.assert_no_tokens(gitlab)


def test_unregister_glrt_unknown_manager_keeps_entry(gitlab, cmd, cfgdir):
    """Never verified from this machine: GitLab answers 404, the entry stays."""
    a = gitlab.add_runner(token=new_token(), id=11)
    cfg = cfgdir / "config.toml"
    old = write_config(cfg, runner_entry(gitlab.url, a.token, "alpha", 11))
    p = cmd("unregister", "-c", cfg, "--name", "alpha")
    assert p.returncode == 1
    (err,) = error_lines(p.stderr)
    assert err.startswith(f'ERROR: runner "alpha" ({cfg}:4): unregistering failed (404')
    assert err.endswith("it stays in the config")
    assert read_bytes(cfg) == old
    cmd.assert_no_tokens(gitlab)


def test_unregister_legacy_deletes_the_runner(gitlab, cmd, cfgdir):
    reg = new_registration_token()
    gitlab.registration_tokens.add(reg)
    cfg = cfgdir / "config.toml"
    assert register(cmd, cfg, gitlab.url, "-r", reg, "--executor", "shell",
                    "--name", "old-style").returncode == 0
    (runner,) = gitlab.runners.values()
    p = cmd("unregister", "-c", cfg, "--name", "old-style")
    assert p.returncode == 0, p.stderr
    (q,) = gitlab.requests_for("DELETE", ".*")
    assert q.path == "/api/v4/runners"
    assert q.json() == {"token": runner.token}
    assert q.headers["Runner-Token"] == runner.token
    assert gitlab.runners == {}
    assert "runners" not in read_toml(cfg)
    cmd.assert_no_tokens(gitlab)


def test_unregister_all_runners(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(), id=1)
    b = gitlab.add_runner(token=new_token(prefix=""), id=2)
    a.system_ids.add(SID)
    cfg = cfgdir / "config.toml"
    write_config(cfg, runner_entry(gitlab.url, a.token, "alpha", 1),
                 runner_entry(gitlab.url, b.token, "legacy", 2),
                 globals_='concurrent = 3\nunknown_global = 1\n')
    p = cmd("unregister", "-c", cfg, "--all-runners")
    assert p.returncode == 0, p.stderr
    assert "Unregistering all runners" in p.stderr
    assert sorted((q.path, q.json()["token"]) for q in gitlab.requests) == sorted([
        ("/api/v4/runners/managers", a.token), ("/api/v4/runners", b.token)])
    assert read_toml(cfg) == {"concurrent": 3, "unknown_global": 1}
    cmd.assert_no_tokens(gitlab)


def test_unregister_all_runners_keeps_the_ones_that_failed(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(prefix=""), id=1)
    revoked = new_token(prefix="")
    cmd.secret(revoked)
    cfg = cfgdir / "config.toml"
    write_config(cfg, runner_entry(gitlab.url, a.token, "alpha", 1),
                 runner_entry(gitlab.url, revoked, "revoked", 2))
    before = read_toml(cfg)
    p = cmd("unregister", "-c", cfg, "--all-runners")
    assert p.returncode == 1
    (err,) = error_lines(p.stderr)
    assert err.startswith(f'ERROR: runner "revoked" ({cfg}:13): unregistering failed (403')
    assert "GitLab does not know the token" in err
    assert read_toml(cfg)["runners"] == before["runners"][1:]
    cmd.assert_no_tokens(gitlab)


def test_unregister_url_and_token_not_in_config(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(prefix=""), id=5)
    other = gitlab.add_runner(token=new_token(), id=6)
    cfg = cfgdir / "config.toml"
    old = write_config(cfg, runner_entry(gitlab.url, other.token, "other", 6))
    p = cmd("unregister", "-c", cfg, "--url", gitlab.url, "--token", a.token)
    assert p.returncode == 0, p.stderr
    (q,) = gitlab.requests
    assert (q.method, q.path, q.json()) == ("DELETE", "/api/v4/runners", {"token": a.token})
    assert 5 not in gitlab.runners
    assert read_bytes(cfg) == old
    cmd.assert_no_tokens(gitlab)


def test_unregister_url_and_token_of_an_entry_removes_it(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(prefix=""), id=5)
    b = gitlab.add_runner(token=new_token(prefix=""), id=6)
    cfg = cfgdir / "config.toml"
    write_config(cfg, runner_entry(gitlab.url, a.token, "a", 5),
                 runner_entry(gitlab.url, b.token, "b", 6))
    p = cmd("unregister", "-c", cfg, "-u", gitlab.url, "-t", b.token)
    assert p.returncode == 0, p.stderr
    assert [q.json()["token"] for q in gitlab.requests] == [b.token]
    assert [r["name"] for r in read_toml(cfg)["runners"]] == ["a"]
    cmd.assert_no_tokens(gitlab)


def test_unregister_forbidden_keeps_the_entry(gitlab, cmd, cfgdir):
    revoked = new_token(prefix="")
    cmd.secret(revoked)
    cfg = cfgdir / "config.toml"
    old = write_config(cfg, runner_entry(gitlab.url, revoked, "revoked", 2))
    p = cmd("unregister", "-c", cfg, "--name", "revoked")
    assert p.returncode == 1
    (err,) = error_lines(p.stderr)
    assert err.startswith(f'ERROR: runner "revoked" ({cfg}:4): unregistering failed (403')
    assert "Updated" not in p.stderr
    assert read_bytes(cfg) == old
    cmd.assert_no_tokens(gitlab)


@pytest.mark.parametrize("args", [[], ["--url", "http://127.0.0.1:1"]])
def test_unregister_without_selector_is_a_usage_error(cmd, tmp_path, args):
    token = new_token()
    cmd.secret(token)
    cfg = tmp_path / "config.toml"
    old = write_config(cfg, runner_entry("http://127.0.0.1:1", token, "x"))
    p = cmd("unregister", "-c", cfg, *args)
    assert p.returncode == 2
    assert p.stderr.splitlines()[0] == ("runner: unregister: say which runner: --name, "
                                        "--token (and --url), or --all-runners")
    assert p.stderr.splitlines()[1].startswith("usage: runner unregister")
    assert read_bytes(cfg) == old
    cmd.assert_no_tokens()


def test_unregister_by_token_alone(gitlab, cmd, cfgdir):
    """gitlab-runner's RunnerByToken: --token picks the entry, its URL is used."""
    a = gitlab.add_runner(token=new_token(prefix=""), id=5)
    b = gitlab.add_runner(token=new_token(prefix=""), id=6)
    cfg = cfgdir / "config.toml"
    write_config(cfg, runner_entry(gitlab.url, a.token, "a", 5),
                 runner_entry(gitlab.url, b.token, "b", 6))
    p = cmd("unregister", "-c", cfg, "--token", a.token)
    assert p.returncode == 0, p.stderr
    assert [(q.path, q.json()["token"]) for q in gitlab.requests] == [
        ("/api/v4/runners", a.token)]
    assert [r["name"] for r in read_toml(cfg)["runners"]] == ["b"]
    cmd.assert_no_tokens(gitlab)


def test_unregister_by_token_not_in_config_without_url(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(prefix=""), id=5)
    other = new_token(prefix="")
    cmd.secret(other)
    cfg = cfgdir / "config.toml"
    old = write_config(cfg, runner_entry(gitlab.url, a.token, "a", 5))
    p = cmd("unregister", "-c", cfg, "--token", other)
    assert p.returncode == 1
    assert last_line(p.stderr).startswith("ERROR: no runner with the token ")
    assert gitlab.requests == []
    assert read_bytes(cfg) == old
    cmd.assert_no_tokens(gitlab)


def test_unregister_name_and_token_must_both_match(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(prefix=""), id=5)
    b = gitlab.add_runner(token=new_token(prefix=""), id=6)
    cfg = cfgdir / "config.toml"
    old = write_config(cfg, runner_entry(gitlab.url, a.token, "a", 5),
                       runner_entry(gitlab.url, b.token, "b", 6))
    p = cmd("unregister", "-c", cfg, "--name", "a", "--token", b.token)
    assert p.returncode == 1
    assert last_line(p.stderr).startswith('ERROR: no runner named "a" with the token ')
    assert gitlab.requests == []
    assert read_bytes(cfg) == old
    p = cmd("unregister", "-c", cfg, "--name", "b", "--token", b.token)
    assert p.returncode == 0, p.stderr
    assert [q.json()["token"] for q in gitlab.requests] == [b.token]
    assert [r["name"] for r in read_toml(cfg)["runners"]] == ["a"]
    cmd.assert_no_tokens(gitlab)


def test_unregister_unknown_name(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(), id=1)
    cfg = cfgdir / "config.toml"
    old = write_config(cfg, runner_entry(gitlab.url, a.token, "alpha", 1))
    p = cmd("unregister", "-c", cfg, "--name", "beta")
    assert p.returncode == 1
    assert last_line(p.stderr) == f'ERROR: no runner named "beta" in {cfg}'
    assert gitlab.requests == []
    assert read_bytes(cfg) == old
    cmd.assert_no_tokens(gitlab)


# ---------------------------------------------------------------------------
# reset-token
# ---------------------------------------------------------------------------

def test_reset_token_with_the_runner_token(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(), id=21)
    b = gitlab.add_runner(token=new_token(), id=22)
    old_token = a.token
    gitlab.token_expires_in = 7200
    cfg = cfgdir / "config.toml"
    write_config(cfg, runner_entry(gitlab.url, a.token, "alpha", 21),
                 runner_entry(gitlab.url, b.token, "beta", 22))
    before = read_toml(cfg)
    t0 = datetime.now(timezone.utc).replace(microsecond=0)
    p = cmd("reset-token", "-c", cfg, "--name", "alpha")
    t1 = datetime.now(timezone.utc)
    assert p.returncode == 0, p.stderr
    assert 'Resetting runner authentication token... succeeded: runner "alpha"' in p.stderr
    assert f"Updated {cfg}" in p.stderr

    (q,) = gitlab.requests
    assert (q.method, q.path) == ("POST", "/api/v4/runners/reset_authentication_token")
    assert q.json() == {"token": old_token}
    assert "Runner-Token" not in q.headers
    assert "Private-Token" not in q.headers
    assert q.response_status == 201

    new = gitlab.runners[21].token
    assert new != old_token
    assert gitlab.runner(old_token) is None
    after = read_toml(cfg)
    entry = after["runners"][0]
    assert entry["token"] == new
    assert t0 <= entry["token_obtained_at"] <= t1
    assert abs(entry["token_expires_at"] - toml_time(gitlab.runners[21].token_expires_at)) \
        < timedelta(seconds=1)
    assert after["runners"][1] == before["runners"][1]
    for k in ("name", "url", "id", "executor"):
        assert entry[k] == before["runners"][0][k]

    # The old token is refused now; the saved one works.
    p = cmd("verify", "-c", cfg)
    assert p.returncode == 0, p.stderr
    assert gitlab.requests[-1].response_status == 200
    cmd.assert_no_tokens(gitlab)


def test_reset_token_with_a_pat(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(), id=31)
    old_token = a.token
    pat = new_token("glpat-")
    gitlab.pats[pat] = True
    cfg = cfgdir / "config.toml"
    write_config(cfg, runner_entry(gitlab.url, a.token, "alpha", 31))
    p = cmd("reset-token", "-c", cfg, "--name", "alpha", "--pat", pat)
    assert p.returncode == 0, p.stderr
    (q,) = gitlab.requests
    assert (q.method, q.path) == ("POST", "/api/v4/runners/31/reset_authentication_token")
    assert q.headers["Private-Token"] == pat
    assert "Runner-Token" not in q.headers
    assert q.body == b""
    entry = read_toml(cfg)["runners"][0]
    assert entry["token"] == gitlab.runners[31].token != old_token
    assert entry["token_expires_at"] == toml_time(ZERO_TIME)
    cmd.assert_no_tokens(gitlab)


@pytest.mark.parametrize("known,allowed", [(False, None), (True, False)],
                         ids=["unknown-pat-401", "pat-without-rights-403"])
def test_reset_token_wrong_pat(gitlab, cmd, cfgdir, known, allowed):
    a = gitlab.add_runner(token=new_token(), id=41)
    pat = new_token("glpat-")
    cmd.secret(pat)
    if known:
        gitlab.pats[pat] = allowed
    cfg = cfgdir / "config.toml"
    old = write_config(cfg, runner_entry(gitlab.url, a.token, "alpha", 41))
    p = cmd("reset-token", "-c", cfg, "--name", "alpha", "--pat", pat)
    assert p.returncode == 1
    (err,) = error_lines(p.stderr)
    assert err.startswith(f'ERROR: runner "alpha" ({cfg}:4): resetting the token failed (')
    assert err.endswith("(check used token)")
    assert read_bytes(cfg) == old
    assert gitlab.runners[41].token == a.token
    cmd.assert_no_tokens(gitlab)


def test_pat_echoed_by_gitlab_is_masked(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(), id=41)
    pat = new_token("glpat-")
    gitlab.pats[pat] = True
    gitlab.script(method="POST", path=r"/runners/\d+/reset_authentication_token$",
                  status=401, body={"message": f"401 Unauthorized: {pat}"})
    cfg = cfgdir / "config.toml"
    old = write_config(cfg, runner_entry(gitlab.url, a.token, "alpha", 41))
    p = cmd("reset-token", "-c", cfg, "--name", "alpha", "--pat", pat)
    assert p.returncode == 1
    assert "401 Unauthorized" in last_line(p.stderr)
    assert read_bytes(cfg) == old
    cmd.assert_no_tokens(gitlab)


def test_reset_token_revoked_runner_token(gitlab, cmd, cfgdir):
    revoked = new_token()
    cmd.secret(revoked)
    cfg = cfgdir / "config.toml"
    old = write_config(cfg, runner_entry(gitlab.url, revoked, "alpha", 41))
    p = cmd("reset-token", "-c", cfg, "--name", "alpha")
    assert p.returncode == 1
    assert last_line(p.stderr).endswith("(check used token)")
    assert read_bytes(cfg) == old
    cmd.assert_no_tokens(gitlab)


def test_reset_token_pat_needs_an_id(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(), id=41)
    pat = new_token("glpat-")
    gitlab.pats[pat] = True
    cfg = cfgdir / "config.toml"
    old = write_config(cfg, runner_entry(gitlab.url, a.token, "alpha").replace(
        "  id = 0\n", ""))
    p = cmd("reset-token", "-c", cfg, "--name", "alpha", "--pat", pat)
    assert p.returncode == 1
    assert "has no id in the config" in last_line(p.stderr)
    assert gitlab.requests == []
    assert read_bytes(cfg) == old
    cmd.assert_no_tokens(gitlab)


def test_reset_token_by_url_and_id(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(), id=51)
    b = gitlab.add_runner(token=new_token(), id=52)
    cfg = cfgdir / "config.toml"
    write_config(cfg, runner_entry(gitlab.url, a.token, "a", 51),
                 runner_entry(gitlab.url, b.token, "b", 52))
    old_a, old_b = a.token, b.token
    p = cmd("reset-token", "-c", cfg, "--url", gitlab.url, "--id", "52")
    assert p.returncode == 0, p.stderr
    assert [q.json()["token"] for q in gitlab.requests] == [old_b]
    tokens = [r["token"] for r in read_toml(cfg)["runners"]]
    assert tokens == [old_a, gitlab.runners[52].token]
    assert tokens[1] != old_b
    cmd.assert_no_tokens(gitlab)


def test_reset_token_without_selector_is_a_usage_error(cmd, tmp_path):
    token = new_token()
    cmd.secret(token)
    cfg = tmp_path / "config.toml"
    write_config(cfg, runner_entry("http://127.0.0.1:1", token, "x"))
    p = cmd("reset-token", "-c", cfg)
    assert p.returncode == 2
    assert p.stderr.splitlines()[0].startswith("runner: reset-token: say which runner")
    cmd.assert_no_tokens()


def test_reset_token_all_runners(gitlab, cmd, cfgdir):
    a = gitlab.add_runner(token=new_token(), id=51)
    b = gitlab.add_runner(token=new_token(), id=52)
    cfg = cfgdir / "config.toml"
    write_config(cfg, runner_entry(gitlab.url, a.token, "a", 51),
                 runner_entry(gitlab.url, b.token, "b", 52))
    old = {a.token, b.token}
    p = cmd("reset-token", "-c", cfg, "--all-runners")
    assert p.returncode == 0, p.stderr
    tokens = [r["token"] for r in read_toml(cfg)["runners"]]
    assert tokens == [gitlab.runners[51].token, gitlab.runners[52].token]
    assert not old & set(tokens)
    cmd.assert_no_tokens(gitlab)


# ---------------------------------------------------------------------------
# Where the tokens go, across every command
# ---------------------------------------------------------------------------

def test_private_token_only_on_the_pat_reset(gitlab, cmd, cfgdir):
    """A whole session of commands: Private-Token appears once, on the --pat
    reset, with the PAT; every runner token is in its body and header."""
    glrt = gitlab.add_runner(token=new_token(), id=61)
    reg = new_registration_token()
    gitlab.registration_tokens.add(reg)
    pat = new_token("glpat-")
    gitlab.pats[pat] = True
    cfg = cfgdir / "config.toml"

    steps = [
        ("register", "-n", "-c", cfg, "--url", gitlab.url, "-t", glrt.token,
         "--executor", "shell", "--name", "g"),
        ("register", "-n", "-c", cfg, "--url", gitlab.url, "-r", reg,
         "--executor", "shell", "--name", "l"),
        ("verify", "-c", cfg),
        ("reset-token", "-c", cfg, "--name", "g"),
        ("reset-token", "-c", cfg, "--name", "g", "--pat", pat),
        ("verify", "-c", cfg),
        ("unregister", "-c", cfg, "--name", "l"),
        ("unregister", "-c", cfg, "--name", "g"),
    ]
    for args in steps:
        p = cmd(*args)
        assert p.returncode == 0, (args, p.stderr)

    reqs = gitlab.requests
    assert [(q.method, q.path) for q in reqs] == [
        ("POST", "/api/v4/runners/verify"),
        ("POST", "/api/v4/runners"),
        ("POST", "/api/v4/runners/verify"),
        ("POST", "/api/v4/runners/verify"),
        ("POST", "/api/v4/runners/reset_authentication_token"),
        ("POST", "/api/v4/runners/61/reset_authentication_token"),
        ("POST", "/api/v4/runners/verify"),
        ("POST", "/api/v4/runners/verify"),
        ("DELETE", "/api/v4/runners"),
        ("DELETE", "/api/v4/runners/managers"),
    ]
    with_pat = [q for q in reqs if q.headers.get_all("Private-Token")]
    assert len(with_pat) == 1
    assert with_pat[0].path == "/api/v4/runners/61/reset_authentication_token"
    assert with_pat[0].headers.get_all("Private-Token") == [pat]
    assert with_pat[0].body == b""
    for q in reqs:
        assert q.headers.get_all("Job-Token") == []
        if q is with_pat[0]:
            assert q.headers.get_all("Runner-Token") == []
            continue
        body = q.json()
        assert isinstance(body.get("token"), str) and body["token"]
        assert pat not in q.body.decode()
        if q.path.endswith("/reset_authentication_token"):
            assert q.headers.get_all("Runner-Token") == []
        else:
            assert q.headers.get_all("Runner-Token") == [body["token"]], q.path
        if q.path in ("/api/v4/runners/verify", "/api/v4/runners/managers"):
            assert body["system_id"] == SID
        else:
            assert "system_id" not in body
    assert gitlab.violations == []
    cmd.assert_no_tokens(gitlab)


# ---------------------------------------------------------------------------
# A config that cannot be written: a clear error, the old file intact
# ---------------------------------------------------------------------------

def _readonly_config(readonly_dir, *entries):
    d, prefix = readonly_dir
    text = ("concurrent = 2\n\n" + "".join(entries)).encode()
    return _make_readonly(d, text), text, prefix


def test_verify_delete_config_cannot_be_written(gitlab, cmd, readonly_dir):
    a = gitlab.add_runner(token=new_token(), id=1)
    revoked = new_token()
    cmd.secret(revoked)
    cfg, old, prefix = _readonly_config(readonly_dir,
                                        runner_entry(gitlab.url, a.token, "alpha", 1),
                                        runner_entry(gitlab.url, revoked, "gone", 2))
    p = cmd("verify", "--delete", "-c", cfg, prefix=prefix)
    assert p.returncode == 1
    err = last_line(p.stderr)
    assert err.startswith(f"ERROR: cannot save {cfg}: ") and "Permission denied" in err, err
    assert "Updated" not in p.stderr
    assert read_bytes(cfg) == old
    cmd.assert_no_tokens(gitlab)


def test_unregister_config_cannot_be_written(gitlab, cmd, readonly_dir):
    a = gitlab.add_runner(token=new_token(prefix=""), id=1)
    cfg, old, prefix = _readonly_config(readonly_dir,
                                        runner_entry(gitlab.url, a.token, "alpha", 1))
    p = cmd("unregister", "-c", cfg, "--name", "alpha", prefix=prefix)
    assert p.returncode == 1
    err = last_line(p.stderr)
    assert err.startswith(f"ERROR: cannot save {cfg}: ") and "Permission denied" in err, err
    assert read_bytes(cfg) == old
    assert [q.response_status for q in gitlab.requests] == [204]
    cmd.assert_no_tokens(gitlab)


def test_reset_token_config_cannot_be_written(gitlab, cmd, readonly_dir):
    """GitLab forgets the old token when it gives a new one: with nowhere to save
    the new one, nothing is reset (the old token keeps working)."""
    a = gitlab.add_runner(token=new_token(), id=1)
    pat = new_token("glpat-")
    gitlab.pats[pat] = True
    cfg, old, prefix = _readonly_config(readonly_dir,
                                        runner_entry(gitlab.url, a.token, "alpha", 1))
    for extra in ([], ["--pat", pat]):
        p = cmd("reset-token", "-c", cfg, "--name", "alpha", *extra, prefix=prefix)
        assert p.returncode == 1
        err = last_line(p.stderr)
        assert err == (f"ERROR: {cfg}: cannot save a new token there (Permission denied): "
                       "nothing was reset"), err
    assert read_bytes(cfg) == old
    assert gitlab.requests == []
    assert gitlab.runner(a.token) is a
    cmd.assert_no_tokens(gitlab)


def test_remote_cache_type_is_named_by_list_and_once_by_run(gitlab, cmd, cfgdir):
    """A [runners.cache] Type this build cannot serve: one line per entry."""
    a = gitlab.add_runner(token=new_token(), id=1)
    b = gitlab.add_runner(token=new_token(), id=2)
    cfg = cfgdir / "config.toml"
    write_config(cfg, runner_entry(gitlab.url, a.token, "s3-one", 1,
                                   extra='  [runners.cache]\n    Type = "s3"\n'),
                 runner_entry(gitlab.url, b.token, "local", 2))
    p = cmd("list", "-c", cfg)
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if "cache Type" in ln]
    assert lines == [f'WARNING: {cfg}:4: runner "s3-one": cache Type "s3": not supported '
                     'by this build (no remote cache: caches stay on this machine)'], p.stderr
    proc = cmd.start("run", "-c", cfg)
    cmd.wait_stderr(proc, 'cache Type "s3"')
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    rc, out, err = cmd.finish(proc)
    lines = [ln for ln in err.splitlines() if "cache Type" in ln]
    assert len(lines) == 1 and 'runner "s3-one"' in lines[0], err
    cmd.assert_no_tokens(gitlab)
