"""Self-tests of the git server fixture: real git clients against it.

Why: the daemon's get_sources tests trust this server to behave like
GitLab's smart HTTP (Basic auth with the job token, refs GitLab has,
submodules on the same host); if it did not, a runner bug could pass or a
correct runner fail.  Every git command runs with GIT_TERMINAL_PROMPT=0 and
a timeout, so a credentials problem fails fast instead of hanging.
"""
import base64
import gzip
import http.client
import os
import socket
import subprocess
import time

import pytest

from git_server import (JOB_TOKEN_USER, GitServer, git_env, git_repos,  # noqa: F401
                        git_server, make_repos)

TOKEN = "glcbt-64_fixture-token-123"
MR_REFSPEC = "+refs/merge-requests/1/head:refs/remotes/origin/merge-requests/1/head"


def git(*args, cwd=None, check=True, env=None):
    done = subprocess.run(["git", *args], cwd=cwd, env=git_env(env), capture_output=True,
                          text=True, timeout=20, stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done


def out(*args, cwd):
    return git(*args, cwd=cwd).stdout.strip()


def basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def http_request(server, method, path, headers=None, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def runner_style_fetch(server, workdir, refspecs, depth=None, token=TOKEN):
    """Fetch like get_sources (9.2): clean origin URL, credentials only via insteadOf."""
    git("init", "-q", workdir)
    git("remote", "add", "origin", server.clean_url("group/project"), cwd=workdir)
    git("config", f"url.http://{JOB_TOKEN_USER}:{token}@127.0.0.1:{server.port}/.insteadOf",
        server.url + "/", cwd=workdir)
    args = ["fetch", "origin", "--no-recurse-submodules", *refspecs, "--prune", "--quiet"]
    if depth:
        args += ["--depth", str(depth)]
    return git(*args, cwd=workdir)


PINNED = {
    "main_head": "8621a8939fdc728b053ebf8737120aa5404fa175",
    "main_tilde2": "5f215f58f67aedb170e37b66628de053d7907f01",
    "tag_commit": "5f215f58f67aedb170e37b66628de053d7907f01",
    "tag_object": "8eb577fce35326a2c981430c07f7502442a092db",
    "feature_head": "b8f3396f9a7498b7fc7c72ed0750121344de48da",
    "mr_head": "84a79a0f0a614a880d920300252a68dabf91711f",
    "lib_head": "93fef4f2a8af4ab26fdba5adb39a54cad88cf50c",
}


def test_shas_are_stable(git_repos, tmp_path):
    """Built twice, same SHAs, equal to the pinned ones: tests may rely on them."""
    assert git_repos.shas() == PINNED
    assert make_repos(tmp_path / "again").shas() == PINNED
    assert git_repos.main_tilde2 == git_repos.tag_commit == git_repos.main_commits[2]
    assert len(set(git_repos.shas().values())) == 6   # main_tilde2 == tag_commit


def test_clone_with_job_token(git_server, git_repos, tmp_path):
    git_server.token = TOKEN
    dest = str(tmp_path / "clone")
    git("clone", "-q", git_server.repo_url("group/project"), dest)
    assert out("rev-parse", "HEAD", cwd=dest) == git_repos.main_head
    assert out("rev-list", "--count", "HEAD", cwd=dest) == "5"
    assert os.path.isfile(os.path.join(dest, "src", "c.txt"))
    reqs = git_server.requests_for("group/project")
    # git's first request carries no credentials: 401 challenge, then the token.
    assert reqs[0].status == 401 and reqs[0].user is None
    assert all(r.user == JOB_TOKEN_USER and r.status == 200 for r in reqs[1:])
    assert any(r.method == "POST" and r.service == "git-upload-pack" for r in reqs)
    assert reqs[-1].git_protocol == "version=2" and reqs[-1].user_agent.startswith("git/")
    assert git_server.auth_failures == 0


def test_clone_branch_and_tag(git_server, git_repos, tmp_path):
    git_server.token = TOKEN
    dest = str(tmp_path / "feature")
    git("clone", "-q", "--branch", "feature", git_server.repo_url("group/project"), dest)
    assert out("rev-parse", "HEAD", cwd=dest) == git_repos.feature_head
    assert out("rev-parse", "v1.0", cwd=dest) == git_repos.tag_object
    assert out("cat-file", "-t", "v1.0", cwd=dest) == "tag"
    assert out("rev-parse", "v1.0^{commit}", cwd=dest) == git_repos.tag_commit


def test_runner_style_fetch_of_mr_ref_and_pipeline_ref(git_server, git_repos, tmp_path):
    git_server.token = TOKEN
    dest = str(tmp_path / "mr")
    runner_style_fetch(git_server, dest, [MR_REFSPEC, "+refs/pipelines/1:refs/pipelines/1",
                                          "+refs/heads/main:refs/remotes/origin/main"])
    assert out("rev-parse", "refs/remotes/origin/merge-requests/1/head",
               cwd=dest) == git_repos.mr_head
    assert out("rev-parse", "refs/pipelines/1", cwd=dest) == git_repos.main_head
    git("-c", "submodule.recurse=false", "checkout", "-f", "-q", git_repos.mr_head, cwd=dest)
    assert os.path.isfile(os.path.join(dest, "src", "mr.txt"))
    # The MR commit is on no branch.
    assert out("branch", "-r", "--contains", git_repos.mr_head, cwd=dest) == \
        "origin/merge-requests/1/head"


def test_shallow_depth_2(git_server, git_repos, tmp_path):
    git_server.token = TOKEN
    dest = str(tmp_path / "shallow")
    runner_style_fetch(git_server, dest, ["+refs/heads/main:refs/remotes/origin/main"], depth=2)
    assert out("rev-list", "--count", "origin/main", cwd=dest) == "2"
    assert out("rev-list", "origin/main", cwd=dest).split() == \
        [git_repos.main_head, git_repos.main_commits[3]]
    assert os.path.isfile(os.path.join(dest, ".git", "shallow"))
    assert git("cat-file", "-e", git_repos.main_tilde2, cwd=dest, check=False).returncode != 0


def test_submodule_through_same_server(git_server, git_repos, tmp_path):
    git_server.token = TOKEN
    dest = str(tmp_path / "super")
    git("clone", "-q", git_server.repo_url("group/project"), dest)
    git("submodule", "update", "--init", cwd=dest)
    assert out("rev-parse", "HEAD", cwd=os.path.join(dest, "lib")) == git_repos.lib_head
    lib = git_server.requests_for("group/lib")
    assert any(r.user == JOB_TOKEN_USER and r.status == 200 and r.method == "POST"
               for r in lib)


def test_submodule_with_clean_origin_needs_host_wide_credentials(git_server, git_repos,
                                                                  tmp_path):
    """Runner-style: origin without userinfo; ../lib.git resolves to the same host.

    The superproject's own .git/config does not reach the submodule's clone
    (a separate repository): the credentials must come from config the
    child git sees too (git -c, GIT_CONFIG_*, a global/include file).
    """
    git_server.token = TOKEN
    dest = str(tmp_path / "super")
    runner_style_fetch(git_server, dest, ["+refs/heads/main:refs/remotes/origin/main"])
    git("-c", "submodule.recurse=false", "checkout", "-f", "-q", git_repos.main_head, cwd=dest)
    done = git("submodule", "update", "--init", cwd=dest, check=False)
    assert done.returncode != 0 and "could not read Username" in done.stderr
    assert out("config", "submodule.lib.url", cwd=dest) == git_server.clean_url("group/lib")
    insteadof = (f"url.http://{JOB_TOKEN_USER}:{TOKEN}@127.0.0.1:{git_server.port}/"
                 f".insteadOf={git_server.url}/")
    git("-c", insteadof, "submodule", "update", "--init", cwd=dest)
    assert out("rev-parse", "HEAD", cwd=os.path.join(dest, "lib")) == git_repos.lib_head


@pytest.mark.parametrize("token", ["wrong-token", None])
def test_bad_or_missing_credentials_fail_without_prompt(git_server, tmp_path, token):
    git_server.token = TOKEN
    url = (git_server.repo_url("group/project", token=token) if token
           else git_server.clean_url("group/project"))
    start = time.monotonic()
    done = git("clone", "-q", url, str(tmp_path / "denied"), check=False)
    assert done.returncode != 0
    assert time.monotonic() - start < 5
    if token:
        assert "Authentication failed" in done.stderr
        assert git_server.auth_failures >= 1
        assert any(r.user == JOB_TOKEN_USER and r.status == 401 for r in git_server.requests)
    else:
        assert "terminal prompts disabled" in done.stderr or "could not read" in done.stderr
        assert git_server.auth_failures == 0
    assert all(r.status == 401 for r in git_server.requests)


def test_401_like_gitlab_and_token_change(git_server):
    git_server.token = TOKEN
    path = "/group/project.git/info/refs?service=git-upload-pack"
    status, headers, _ = http_request(git_server, "GET", path)
    assert status == 401 and headers["WWW-Authenticate"] == 'Basic realm="GitLab"'
    status, _, _ = http_request(git_server, "GET", path, {"Authorization": basic("root", TOKEN)})
    assert status == 401 and git_server.auth_failures == 1
    status, headers, body = http_request(git_server, "GET", path,
                                         {"Authorization": basic(JOB_TOKEN_USER, TOKEN)})
    assert status == 200
    assert headers["Content-Type"] == "application/x-git-upload-pack-advertisement"
    assert body.startswith(b"001e# service=git-upload-pack\n")
    _, _, body = http_request(git_server, "GET", path,
                              {"Authorization": basic(JOB_TOKEN_USER, TOKEN),
                               "Git-Protocol": "version=2"})
    assert b"version 2\n" in body and b"ls-refs" in body   # Git-Protocol reached upload-pack
    git_server.token = {"job-a", "job-b"}        # several concurrent jobs
    status, _, _ = http_request(git_server, "GET", path,
                                {"Authorization": basic(JOB_TOKEN_USER, "job-b")})
    assert status == 200
    assert [r.status for r in git_server.requests] == [401, 401, 200, 200, 200]
    assert [r.user for r in git_server.requests] == [None, "root"] + [JOB_TOKEN_USER] * 3


def test_anonymous_when_no_token(git_server, git_repos, tmp_path):
    dest = str(tmp_path / "anon")
    git("clone", "-q", git_server.clean_url("group/project"), dest)
    assert out("rev-parse", "HEAD", cwd=dest) == git_repos.main_head
    assert all(r.user is None and r.status == 200 for r in git_server.requests)


def _upload_pack_request(sha):
    """A protocol v0 fetch of one commit: want, flush, done."""
    want = f"want {sha} ofs-delta\n"
    return (f"{len(want) + 4:04x}{want}0000" + "0009done\n").encode()


@pytest.mark.parametrize("framing", ["gzip", "chunked"])
def test_post_body_gzip_and_chunked(git_server, git_repos, framing):
    """git gzips big upload-pack requests and sends chunked ones past http.postBuffer."""
    body = _upload_pack_request(git_repos.lib_head)
    headers = {"Content-Type": "application/x-git-upload-pack-request"}
    if framing == "gzip":
        body = gzip.compress(body)
        headers["Content-Encoding"] = "gzip"
    else:
        body = iter([body[:10], body[10:]])   # http.client sends an iterable chunked
    status, headers, data = http_request(git_server, "POST", "/group/lib.git/git-upload-pack",
                                         headers, body)
    assert status == 200, data
    assert headers["Content-Type"] == "application/x-git-upload-pack-result"
    assert data.startswith(b"0008NAK\n") and b"PACK" in data


def test_missing_repository_is_404(git_server):
    status, _, _ = http_request(git_server, "GET",
                                "/group/nope.git/info/refs?service=git-upload-pack")
    assert status == 404
    assert git_server.requests[-1].status == 404


def test_stop_is_prompt_with_clients_connected(git_repos):
    server = GitServer(git_repos.root, token=TOKEN).start()
    idle = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    half = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    half.sendall(b"POST /group/project.git/git-upload-pack HTTP/1.1\r\nHost: x\r\n"
                 b"Content-Type: application/x-git-upload-pack-request\r\n"
                 b"Authorization: " + basic(JOB_TOKEN_USER, TOKEN).encode() +
                 b"\r\nContent-Length: 1000\r\n\r\n0032want ")   # body never finished
    time.sleep(0.2)
    start = time.monotonic()
    server.stop()
    assert time.monotonic() - start < 1.0
    for sock in (idle, half):
        received = b""
        try:
            while True:      # EOF promptly (the sockets' timeout is 5 s)
                data = sock.recv(4096)
                if not data:
                    break
                received += data
        except ConnectionResetError:
            pass
        sock.close()
        # http-backend may have sent its headers; the cut body must not look complete.
        assert not received.endswith(b"0\r\n\r\n")
    assert time.monotonic() - start < 2.0
    server.stop()  # idempotent
    assert not server.errors, server.errors
