"""TLS to GitLab: tls-ca-file, tls-cert-file/tls-key-file, and the
<config dir>/certs/<host>.crt, <host>.auth.crt, <host>.auth.key lookup
(issue 3, "api/"), through register, verify and reset-token against the
HTTPS GitLab double.

Uses the helpers and the `cmd` fixture of test_register.py: every test
ends with cmd.assert_no_tokens(...).
"""
import shutil
import socket
import time

import pytest

from gitlab_double import certs
from test_register import (cmd, last_line, new_token, read_bytes, read_toml,  # noqa: F401
                           register, runner_entry, write_config)

FAST = 3.0      # a certificate error is not retried: well under the retry schedule


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory):
    """A second, unrelated CA (and certificates), for "wrong CA" cases."""
    return certs.generate(tmp_path_factory.mktemp("other-tls"))


def put_certs(cfgdir, host="127.0.0.1", ca=None, cert=None, key=None):
    d = cfgdir / "certs"
    d.mkdir(exist_ok=True)
    if ca:
        shutil.copy(ca, d / f"{host}.crt")
    if cert:
        shutil.copy(cert, d / f"{host}.auth.crt")
    if key:
        shutil.copy(key, d / f"{host}.auth.key")


def assert_cert_failure_fast(d, p, elapsed, *, what="certificate"):
    """The command failed on the certificate at once, and GitLab saw no request."""
    assert p.returncode == 1
    assert elapsed < FAST, elapsed
    err = last_line(p.stderr)
    assert what in err.lower(), err
    assert d.requests == [], d.summary()
    assert "attempt 2/" not in p.stderr, "a certificate error was retried:\n" + p.stderr
    assert len(d.tls_failures) == 1, d.tls_failures


# ---------------------------------------------------------------------------
# Server certificate
# ---------------------------------------------------------------------------

def test_register_and_verify_with_tls_ca_file(gitlab_tls, tls_files, cmd, tmp_path):
    runner = gitlab_tls.add_runner(token=new_token(), id=71)
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab_tls.url, "--token", runner.token, "--executor", "shell",
                 "--name", "secure", "--tls-ca-file", tls_files.ca_cert)
    assert p.returncode == 0, p.stderr
    entry = read_toml(cfg)["runners"][0]
    assert entry["url"] == gitlab_tls.url and entry["url"].startswith("https://")
    assert entry["tls-ca-file"] == tls_files.ca_cert
    assert entry["id"] == 71

    # verify and reset-token read tls-ca-file from the entry.
    p = cmd("verify", "-c", cfg)
    assert p.returncode == 0, p.stderr
    assert 'is valid: runner "secure"' in p.stderr
    p = cmd("reset-token", "-c", cfg, "--name", "secure")
    assert p.returncode == 0, p.stderr
    assert read_toml(cfg)["runners"][0]["token"] == gitlab_tls.runners[71].token
    assert [q.path for q in gitlab_tls.requests] == [
        "/api/v4/runners/verify", "/api/v4/runners/verify",
        "/api/v4/runners/reset_authentication_token"]
    assert gitlab_tls.tls_failures == []
    cmd.assert_no_tokens(gitlab_tls)


def test_tls_ca_file_from_the_environment(gitlab_tls, tls_files, cmd, tmp_path):
    runner = gitlab_tls.add_runner(token=new_token())
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab_tls.url, "--token", runner.token, "--executor", "shell",
                 env={"CI_SERVER_TLS_CA_FILE": tls_files.ca_cert})
    assert p.returncode == 0, p.stderr
    assert read_toml(cfg)["runners"][0]["tls-ca-file"] == tls_files.ca_cert
    cmd.assert_no_tokens(gitlab_tls)


def test_register_without_ca_fails_fast_on_the_certificate(gitlab_tls, cmd, tmp_path):
    runner = gitlab_tls.add_runner(token=new_token())
    cfg = tmp_path / "config.toml"
    t0 = time.monotonic()
    p = register(cmd, cfg, gitlab_tls.url, "--token", runner.token, "--executor", "shell")
    elapsed = time.monotonic() - t0
    assert_cert_failure_fast(gitlab_tls, p, elapsed)
    assert last_line(p.stderr).startswith(
        f"ERROR: register: verifying the token with {gitlab_tls.url}: SSL certificate problem")
    assert not cfg.exists()
    cmd.assert_no_tokens(gitlab_tls)


def test_register_with_the_wrong_ca_fails(gitlab_tls, other_ca, cmd, tmp_path):
    reg = "GR1348941" + new_token("", 20)
    gitlab_tls.registration_tokens.add(reg)
    cfg = tmp_path / "config.toml"
    t0 = time.monotonic()
    p = register(cmd, cfg, gitlab_tls.url, "-r", reg, "--executor", "shell",
                 "--tls-ca-file", other_ca.ca_cert)
    elapsed = time.monotonic() - t0
    assert_cert_failure_fast(gitlab_tls, p, elapsed)
    assert not cfg.exists()
    assert gitlab_tls.runners == {}
    cmd.assert_no_tokens(gitlab_tls)


def test_verify_without_ca_in_config_fails_fast(gitlab_tls, cmd, tmp_path):
    runner = gitlab_tls.add_runner(token=new_token(), id=3)
    cfg = tmp_path / "config.toml"
    old = write_config(cfg, runner_entry(gitlab_tls.url, runner.token, "secure", 3))
    t0 = time.monotonic()
    p = cmd("verify", "-c", cfg, "--delete")
    elapsed = time.monotonic() - t0
    assert_cert_failure_fast(gitlab_tls, p, elapsed)
    assert last_line(p.stderr).startswith(
        f'ERROR: runner "secure" ({cfg}:4): verifying failed: SSL certificate problem')
    assert read_bytes(cfg) == old   # not a 403: --delete removes nothing
    cmd.assert_no_tokens(gitlab_tls)


def test_ca_from_config_dir_certs(gitlab_tls, tls_files, cmd, tmp_path):
    put_certs(tmp_path, ca=tls_files.ca_cert)
    runner = gitlab_tls.add_runner(token=new_token(), id=72)
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab_tls.url, "--token", runner.token, "--executor", "shell",
                 "--name", "by-dir")
    assert p.returncode == 0, p.stderr
    entry = read_toml(cfg)["runners"][0]
    assert "tls-ca-file" not in entry   # found by host, not written
    p = cmd("verify", "-c", cfg)
    assert p.returncode == 0, p.stderr
    assert len(gitlab_tls.requests) == 2
    assert gitlab_tls.tls_failures == []
    cmd.assert_no_tokens(gitlab_tls)


def test_config_dir_certs_is_per_host(gitlab_tls, tls_files, cmd, tmp_path):
    """certs/localhost.crt is not used for 127.0.0.1."""
    put_certs(tmp_path, host="localhost", ca=tls_files.ca_cert)
    runner = gitlab_tls.add_runner(token=new_token())
    cfg = tmp_path / "config.toml"
    t0 = time.monotonic()
    p = register(cmd, cfg, gitlab_tls.url, "--token", runner.token, "--executor", "shell")
    assert_cert_failure_fast(gitlab_tls, p, time.monotonic() - t0)
    # ... and it is used for localhost.
    if "127.0.0.1" not in {a[4][0] for a in socket.getaddrinfo("localhost", None)}:
        cmd.assert_no_tokens(gitlab_tls)
        pytest.skip("localhost does not resolve to 127.0.0.1 here")
    url = gitlab_tls.url.replace("127.0.0.1", "localhost")
    p = register(cmd, cfg, url, "--token", runner.token, "--executor", "shell")
    assert p.returncode == 0, p.stderr
    assert read_toml(cfg)["runners"][0]["url"] == url
    cmd.assert_no_tokens(gitlab_tls)


def test_tls_ca_file_wins_over_config_dir_certs(gitlab_tls, tls_files, other_ca, cmd,
                                                tmp_path):
    put_certs(tmp_path, ca=other_ca.ca_cert)   # wrong, but not consulted
    runner = gitlab_tls.add_runner(token=new_token())
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab_tls.url, "--token", runner.token, "--executor", "shell",
                 "--tls-ca-file", tls_files.ca_cert)
    assert p.returncode == 0, p.stderr
    cmd.assert_no_tokens(gitlab_tls)


# ---------------------------------------------------------------------------
# Client certificates
# ---------------------------------------------------------------------------

@pytest.fixture
def gitlab_mtls(gitlab_factory, tls_files):
    """An HTTPS double that requires a client certificate signed by the test CA."""
    return gitlab_factory(tls=tls_files, require_client_cert=True)


def test_client_cert_required_and_missing(gitlab_mtls, tls_files, cmd, tmp_path):
    runner = gitlab_mtls.add_runner(token=new_token())
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab_mtls.url, "--token", runner.token, "--executor", "shell",
                 "--tls-ca-file", tls_files.ca_cert)
    assert p.returncode == 1
    assert last_line(p.stderr).startswith(
        f"ERROR: register: verifying the token with {gitlab_mtls.url}: ")
    assert not cfg.exists()
    assert [q for q in gitlab_mtls.requests if q.response_status is not None] == []
    assert gitlab_mtls.tls_failures, "the double saw no handshake without a certificate"
    assert all("certificate" in f.lower() for f in gitlab_mtls.tls_failures)
    cmd.assert_no_tokens(gitlab_mtls)


def test_client_cert_from_flags(gitlab_mtls, tls_files, cmd, tmp_path):
    runner = gitlab_mtls.add_runner(token=new_token(), id=81)
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab_mtls.url, "--token", runner.token, "--executor", "shell",
                 "--name", "mtls", "--tls-ca-file", tls_files.ca_cert,
                 "--tls-cert-file", tls_files.client_cert, "--tls-key-file",
                 tls_files.client_key)
    assert p.returncode == 0, p.stderr
    entry = read_toml(cfg)["runners"][0]
    assert (entry["tls-cert-file"], entry["tls-key-file"]) == (tls_files.client_cert,
                                                                tls_files.client_key)
    # The entry's files serve verify and reset-token too.
    assert cmd("verify", "-c", cfg).returncode == 0
    p = cmd("reset-token", "-c", cfg, "--name", "mtls")
    assert p.returncode == 0, p.stderr
    reqs = gitlab_mtls.requests
    assert len(reqs) == 3
    assert {q.client_cert for q in reqs} == {"runner test client"}
    assert gitlab_mtls.tls_failures == []
    cmd.assert_no_tokens(gitlab_mtls)


def test_client_cert_from_config_dir_certs(gitlab_mtls, tls_files, cmd, tmp_path):
    put_certs(tmp_path, ca=tls_files.ca_cert, cert=tls_files.client_cert,
              key=tls_files.client_key)
    runner = gitlab_mtls.add_runner(token=new_token(), id=82)
    cfg = tmp_path / "config.toml"
    p = register(cmd, cfg, gitlab_mtls.url, "--token", runner.token, "--executor", "shell",
                 "--name", "by-dir")
    assert p.returncode == 0, p.stderr
    entry = read_toml(cfg)["runners"][0]
    assert not {"tls-ca-file", "tls-cert-file", "tls-key-file"} & set(entry)
    assert cmd("verify", "-c", cfg).returncode == 0
    reqs = gitlab_mtls.requests
    assert len(reqs) == 2
    assert {q.client_cert for q in reqs} == {"runner test client"}
    cmd.assert_no_tokens(gitlab_mtls)


def test_unreadable_client_cert_is_a_clear_error(gitlab_tls, tls_files, cmd, tmp_path):
    runner = gitlab_tls.add_runner(token=new_token())
    cfg = tmp_path / "config.toml"
    missing = str(tmp_path / "no-such-client.crt")
    t0 = time.monotonic()
    p = register(cmd, cfg, gitlab_tls.url, "--token", runner.token, "--executor", "shell",
                 "--tls-ca-file", tls_files.ca_cert, "--tls-cert-file", missing,
                 "--tls-key-file", tls_files.client_key)
    elapsed = time.monotonic() - t0
    assert p.returncode == 1
    assert elapsed < FAST
    err = last_line(p.stderr)
    assert missing in err, err
    assert "attempt 2/" not in p.stderr
    assert gitlab_tls.requests == []
    assert not cfg.exists()
    cmd.assert_no_tokens(gitlab_tls)
