"""Where the job token goes while a job clones with submodules (FF_GIT_URLS_WITHOUT_TOKENS).

git hands the URL it fetches to git-remote-http and fetch-pack as
arguments, and any local user can read a process's argv (ps).  So by
default git is given clean URLs and asks a credential helper for the
password, which the helper reads from CI_JOB_TOKEN in its environment.
These tests run the job shell under strace and look at the argv and the
environment of every process the job started.

The token may be in an environment only as CI_JOB_TOKEN and as the
userinfo of CI_REPOSITORY_URL: GitLab sends both with the token in them,
jobs use them as they are (git clone "$CI_REPOSITORY_URL"), and a
process's environment is readable only by its own user.
"""
import os
import re
import shutil

import pytest

from daemon_helpers import check_run, daemons, entry, new_token  # noqa: F401
from git_server import git_repos, git_server  # noqa: F401
from gitlab_double import job_payload

_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"(\.\.\.)?')

# The job prints which files of its checkout and tmp dir hold the token
# (.git/modules/lib/config, the submodule's, included) while they exist;
# grep reads the token on stdin from printf, a builtin, so not in its argv.
_WHERE_IS_IT = ('{ printf "%s\\n" "$CI_JOB_TOKEN" | grep -rlF -f - .git "$PWD.tmp" || true; } '
                '| sed "s/^/TOKEN-FILE=/"')
_EXT_CONF_THERE = 'test -f "$PWD.tmp/.gitlab-runner.ext.conf" && echo EXT-CONF-THERE'


def traced_shell_dir(tmp_path):
    """A directory with a `bash` that runs /bin/bash under strace (execve, full argv and env).

    Put first in the daemon's PATH, it is what the shell executor starts
    for every stage; each stage's trace goes to traces/trace.<pid>.
    """
    if shutil.which("strace") is None:
        pytest.fail("strace is missing: install strace")
    wrap = tmp_path / "traced-shell"
    traces = tmp_path / "traces"
    wrap.mkdir()
    traces.mkdir()
    script = wrap / "bash"
    script.write_text("#!/bin/sh\n"
                      f"exec strace -f -qq --seccomp-bpf -e trace=execve -s 65535 -v "
                      f"-o '{traces}/trace.'$$ /bin/bash \"$@\"\n")
    script.chmod(0o755)
    return wrap, traces


def _strings(text, what, line):
    """The quoted strings of a strace array ("[...]" already opened) and the text after ']'."""
    out = []
    while not text.startswith("]"):
        m = _STRING.match(text)
        assert m is not None, f"cannot read the {what} of this strace line:\n{line}"
        assert m.group(2) is None, f"strace cut a string short (raise -s):\n{line}"
        out.append(m.group(1))
        text = text[m.end():]
        if text.startswith(", "):
            text = text[2:]
    return out, text[1:]


def execs(traces):
    """(path, argv, env) of every execve in the traces, successful or not."""
    out = []
    for name in sorted(os.listdir(traces)):
        with open(os.path.join(traces, name), errors="replace") as f:
            for line in f:
                at = line.find("execve(")
                if at == -1:
                    continue            # "<... execve resumed>", exits, signals
                rest = line[at + len("execve("):]
                m = _STRING.match(rest)
                assert m is not None and rest[m.end():].startswith(", ["), line
                argv, rest = _strings(rest[m.end() + 3:], "argv", line)
                assert rest.startswith(", ["), line
                env, _ = _strings(rest[3:], "environment", line)
                out.append((m.group(1), argv, env))
    assert out, f"strace recorded no execve in {traces}: the job shell was not traced"
    return out


def clone_with_submodule(gitlab, daemons, git_server, tmp_path, variables=(), **entry_keys):
    """One clone job with GIT_SUBMODULE_STRATEGY=recursive, its shell traced; (job, daemon, execs)."""
    wrap, traces = traced_shell_dir(tmp_path)
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "traced", builds_dir=str(tmp_path / "builds"),
                               **entry_keys)],
                env={"PATH": f"{wrap}:{os.environ['PATH']}"})
    repos = git_server.repos
    job = gitlab.add_job(job_payload(
        script=["cat lib/lib.txt", _EXT_CONF_THERE, _WHERE_IS_IT,
                "echo DIR=$(pwd)"],
        variables={"GIT_STRATEGY": "clone", "GIT_SUBMODULE_STRATEGY": "recursive",
                   **dict(variables)},
        sha=repos.main_head, repo_url=git_server.clean_url(repos.project)), runner=r)
    git_server.token = job.token
    d.start()
    gitlab.wait_for_job(job, ("success", "failed"), timeout=90)
    d.stop()
    assert job.status == "success", job.log_text
    assert "lib 2" in job.log_text                       # the submodule is checked out
    assert "EXT-CONF-THERE" in job.log_text
    assert git_server.requests_for(repos.lib), "the submodule was not fetched over HTTP"
    return job, d, execs(traces)


def job_printed(job, key):
    """The values the job's own commands printed as KEY=value (not the echoed commands)."""
    return [line.split(key + "=", 1)[1].strip() for line in job.log_text.splitlines()
            if key + "=" in line and "$ " not in line]


def remote_helpers(found, repo):
    """The URLs the git-remote-http(s) processes that fetched repo ("group/lib") were given."""
    return [a for path, argv, _ in found
            if os.path.basename(path).startswith("git-remote-http")
            for a in argv[2:] if a.endswith("/" + repo + ".git")]


def test_no_token_in_any_argv_by_default(gitlab, daemons, git_server, tmp_path):
    job, d, found = clone_with_submodule(gitlab, daemons, git_server, tmp_path)
    token, repos = job.token, git_server.repos

    # The trace saw the fetches it is about: both repositories, over HTTP.
    for repo in (repos.project, repos.lib):
        assert remote_helpers(found, repo), f"no git-remote-http for {repo} in the trace: " \
            f"{sorted({os.path.basename(p) for p, _, _ in found})}"
    in_argv = sorted({os.path.basename(path) for path, argv, _ in found
                      if any(token in a for a in argv)})
    assert not in_argv, f"the job token is in the argv of: {in_argv}"
    # git asked the helper (sh -c '<helper> get'), which is how the token got to the server.
    assert any(argv[:2] == ["/bin/sh", "-c"] and "CI_JOB_TOKEN" in argv[2]
               for _, argv, _ in found), "git never ran the credential helper"

    allowed = {f"CI_JOB_TOKEN={token}",
               f"CI_REPOSITORY_URL={git_server.repo_url(repos.project, token=token)}"}
    in_env = sorted({e.split("=", 1)[0] for _, _, env in found for e in env
                     if token in e and e not in allowed})
    assert not in_env, f"the job token is in these environment variables: {in_env}"
    assert any(f"CI_JOB_TOKEN={token}" in env for _, _, env in found), \
        "no process had CI_JOB_TOKEN: the environment check looked at nothing"

    # No file of the checkout or of the job's tmp dir held it during the job...
    assert job_printed(job, "TOKEN-FILE") == [], job.log_text
    # ... nor after it.
    for top, _, files in os.walk(tmp_path / "builds"):
        for name in files:
            with open(os.path.join(top, name), "rb") as f:
                assert token.encode() not in f.read(), os.path.join(top, name)
    assert {r.user for r in git_server.requests} <= {None, "gitlab-ci-token"}
    check_run(gitlab, d, [job])


@pytest.mark.parametrize("where", ["job variable", "config.toml"])
def test_flag_false_keeps_the_insteadof_urls(gitlab, daemons, git_server, tmp_path, where):
    """FF_GIT_URLS_WITHOUT_TOKENS=false: the credentialed URL as insteadOf, as before."""
    if where == "job variable":
        job, d, found = clone_with_submodule(gitlab, daemons, git_server, tmp_path,
                                             {"FF_GIT_URLS_WITHOUT_TOKENS": "false"})
    else:
        job, d, found = clone_with_submodule(
            gitlab, daemons, git_server, tmp_path,
            feature_flags={"FF_GIT_URLS_WITHOUT_TOKENS": False})
    token, repos = job.token, git_server.repos
    # git fetched the credentialed URLs, so the token is where this flag leaves
    # it: in git-remote-http's argv (which also shows the trace can see it)
    # and in the external git config; still not in .git/config.
    for repo in (repos.project, repos.lib):
        assert git_server.repo_url(repo, token=token) in remote_helpers(found, repo), repo
    assert not any(argv[:2] == ["/bin/sh", "-c"] and "CI_JOB_TOKEN" in argv[2]
                   for _, argv, _ in found), "the credential helper ran with the flag false"
    project = job_printed(job, "DIR")[0]
    assert job_printed(job, "TOKEN-FILE") == [project + ".tmp/.gitlab-runner.ext.conf"], \
        job.log_text
    check_run(gitlab, d, [job])
