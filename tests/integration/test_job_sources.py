"""A job's sources: fetched from a real git server (git http-backend) as gitlab-runner does.

The repositories are the fixture ones of git_server.py (fixed SHAs, a
submodule at ../lib.git, a tag, a merge-request ref); the server lets in
only gitlab-ci-token with the job's token, as GitLab does.  Each test
reads what the checkout holds from the job's own script, so what is
asserted is what a user's job would see.
"""
import os

import pytest

from daemon_helpers import check_run, daemons, entry, new_token  # noqa: F401
from git_server import git_repos, git_server  # noqa: F401
from gitlab_double import job_payload


def source_job(gitlab, runner, gs, script, variables=None, **payload):
    """A job whose repository is on gs; the server accepts this job's token only."""
    repos = gs.repos
    payload.setdefault("sha", repos.main_head)
    payload.setdefault("repo_url", gs.clean_url(repos.project))
    job = gitlab.add_job(job_payload(script=script, variables=variables or {}, **payload),
                         runner=runner)
    gs.token = job.token
    return job


def builds_entry(gitlab, r, tmp_path, **keys):
    return entry(gitlab, r, "src", builds_dir=str(tmp_path / "builds"), **keys)


def project_dir(job_log):
    """The checkout path the job printed as 'DIR=<path>'."""
    for line in job_log.splitlines():
        if "DIR=" in line and "$ " not in line:
            return line.split("DIR=", 1)[1].strip()
    raise AssertionError("the job did not print its directory:\n" + job_log)


def test_clone_checks_out_the_pipeline_commit_with_depth_and_submodule(gitlab, daemons,
                                                                        git_server, tmp_path):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [builds_entry(gitlab, r, tmp_path)])
    job = source_job(gitlab, r, git_server,
                     ["echo DIR=$(pwd)", "echo HEAD=$(git rev-parse HEAD)",
                      "echo COUNT=$(git rev-list --count HEAD)", "cat lib/lib.txt",
                      "echo BRANCH=$(git rev-parse --abbrev-ref HEAD)"],
                     variables={"GIT_SUBMODULE_STRATEGY": "normal"}, depth=2)
    d.start()
    gitlab.wait_for_job(job, ("success", "failed"), timeout=60)
    d.stop()
    log = job.log_text
    assert job.status == "success", log
    repos = git_server.repos
    assert f"HEAD={repos.main_head}" in log
    assert "COUNT=2" in log                      # GIT_DEPTH 2
    assert "lib 2" in log                        # the submodule at its recorded commit
    assert "BRANCH=HEAD" in log                  # detached, as gitlab-runner leaves it
    where = project_dir(log)
    assert where.startswith(str(tmp_path / "builds") + "/")
    assert where.endswith("/group/project")

    # The token is in neither the checkout's config nor the log; the remote is clean.
    with open(os.path.join(where, ".git", "config")) as f:
        git_config = f.read()
    assert job.token not in git_config
    assert f"url = {git_server.clean_url(repos.project)}" in git_config
    assert job.token not in log
    # Nor anywhere under the builds directory once the job is over (the
    # external git config with the credentials is removed at cleanup).
    for top, _, files in os.walk(tmp_path / "builds"):
        for name in files:
            with open(os.path.join(top, name), "rb") as f:
                assert job.token.encode() not in f.read(), os.path.join(top, name)
    # Every authenticated request to the server came as gitlab-ci-token.
    users = {req.user for req in git_server.requests}
    assert users <= {None, "gitlab-ci-token"} and "gitlab-ci-token" in users
    assert git_server.requests_for(repos.lib), "the submodule was not fetched over HTTP"
    check_run(gitlab, d, [job])


def test_fetch_reuses_the_checkout_and_clone_starts_over(gitlab, daemons, git_server, tmp_path):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [builds_entry(gitlab, r, tmp_path)])
    d.start()
    first = source_job(gitlab, r, git_server, ["echo DIR=$(pwd)", "touch .git/kept-marker",
                                               "touch untracked-file"])
    gitlab.wait_for_job(first, ("success", "failed"), timeout=60)
    assert first.status == "success", first.log_text
    where = project_dir(first.log_text)

    second = source_job(gitlab, r, git_server,
                        ["ls .git/kept-marker", "test ! -e untracked-file",
                         "echo HEAD=$(git rev-parse HEAD)"],
                        variables={"GIT_STRATEGY": "fetch"}, sha=git_server.repos.main_tilde2)
    gitlab.wait_for_job(second, ("success", "failed"), timeout=60)
    assert second.status == "success", second.log_text
    assert "Created fresh repository." in first.log_text
    assert "Created fresh repository." not in second.log_text
    assert f"HEAD={git_server.repos.main_tilde2}" in second.log_text

    third = source_job(gitlab, r, git_server, ["test ! -e .git/kept-marker", "echo fresh"],
                       variables={"GIT_STRATEGY": "clone"})
    gitlab.wait_for_job(third, ("success", "failed"), timeout=60)
    d.stop()
    assert third.status == "success", third.log_text
    assert "Created fresh repository." in third.log_text
    assert os.path.isdir(os.path.join(where, ".git"))
    check_run(gitlab, d, [first, second, third])


def test_ff_enable_job_cleanup_cleans_a_fetch_and_removes_a_clone(gitlab, daemons, git_server,
                                                                 tmp_path):
    # gitlab-runner's writeCleanupBuildDirectoryScript: fetch keeps .git but cleans
    # (GIT_CLEAN_FLAGS) and resets the checkout; clone removes the directory.
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [builds_entry(gitlab, r, tmp_path)])
    d.start()
    flag = {"FF_ENABLE_JOB_CLEANUP": "true"}
    fetched = source_job(gitlab, r, git_server,
                         ["echo DIR=$(pwd)", "touch untracked-file", "echo changed > README.md"],
                         variables=dict(flag, GIT_STRATEGY="fetch"))
    gitlab.wait_for_job(fetched, ("success", "failed"), timeout=60)
    assert fetched.status == "success", fetched.log_text
    where = project_dir(fetched.log_text)
    assert os.path.isdir(os.path.join(where, ".git"))
    assert not os.path.exists(os.path.join(where, "untracked-file"))
    with open(os.path.join(where, "README.md")) as f:
        assert f.read() != "changed\n"

    cloned = source_job(gitlab, r, git_server, ["echo DIR=$(pwd)"],
                        variables=dict(flag, GIT_STRATEGY="clone"))
    gitlab.wait_for_job(cloned, ("success", "failed"), timeout=60)
    d.stop()
    assert cloned.status == "success", cloned.log_text
    assert not os.path.exists(project_dir(cloned.log_text))
    check_run(gitlab, d, [fetched, cloned])


@pytest.mark.parametrize("kind", ["tag", "merge_request"])
def test_other_refs(gitlab, daemons, git_server, tmp_path, kind):
    repos = git_server.repos
    if kind == "tag":
        ref, sha, refspecs = "v1.0", repos.tag_commit, ["+refs/tags/v1.0:refs/tags/v1.0"]
    else:
        ref, sha = "refs/merge-requests/1/head", repos.mr_head
        refspecs = ["+refs/merge-requests/1/head:refs/merge-requests/1/head"]
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [builds_entry(gitlab, r, tmp_path)])
    payload = job_payload(script=["echo HEAD=$(git rev-parse HEAD)", "ls src"], ref=ref,
                          sha=sha, refspecs=refspecs, repo_url=git_server.clean_url(repos.project))
    if kind == "tag":
        payload["git_info"]["ref_type"] = "tag"
    job = gitlab.add_job(payload, runner=r)
    git_server.token = job.token
    d.start()
    gitlab.wait_for_job(job, ("success", "failed"), timeout=60)
    d.stop()
    assert job.status == "success", job.log_text
    assert f"HEAD={sha}" in job.log_text
    if kind == "merge_request":
        assert "mr.txt" in job.log_text
    check_run(gitlab, d, [job])


def test_none_and_empty_strategies(gitlab, daemons, git_server, tmp_path):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [builds_entry(gitlab, r, tmp_path)])
    d.start()
    cloned = source_job(gitlab, r, git_server, ["echo DIR=$(pwd)"])
    gitlab.wait_for_job(cloned, ("success", "failed"), timeout=60)
    assert cloned.status == "success", cloned.log_text
    where = project_dir(cloned.log_text)
    requests_before = len(git_server.requests)

    none = source_job(gitlab, r, git_server, ["test -e README.md && echo STILL-THERE"],
                      variables={"GIT_STRATEGY": "none"})
    gitlab.wait_for_job(none, ("success", "failed"), timeout=60)
    assert none.status == "success", none.log_text
    assert "Skipping Git repository setup" in none.log_text
    # As gitlab-runner: none and empty turn checkout and submodules off, and say so.
    assert "Skipping Git checkout" in none.log_text
    assert "Skipping Git submodules setup" in none.log_text
    assert "STILL-THERE" in none.log_text
    assert len(git_server.requests) == requests_before     # not one request to git

    empty = source_job(gitlab, r, git_server, ["ls -A | wc -l | sed 's/^/ENTRIES=/'"],
                       variables={"GIT_STRATEGY": "empty"})
    gitlab.wait_for_job(empty, ("success", "failed"), timeout=60)
    d.stop()
    assert empty.status == "success", empty.log_text
    assert "ENTRIES=0" in empty.log_text
    assert "Skipping Git checkout" in empty.log_text
    assert "Skipping Git submodules setup" in empty.log_text
    assert len(git_server.requests) == requests_before
    assert os.path.isdir(where)
    check_run(gitlab, d, [cloned, none, empty])


def test_a_refused_fetch_fails_the_job_without_showing_the_token(gitlab, daemons, git_server,
                                                                 tmp_path):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [builds_entry(gitlab, r, tmp_path)])
    job = source_job(gitlab, r, git_server, ["echo must not run"])
    git_server.token = "some-other-job-token"
    d.start()
    gitlab.wait_for_job(job, ("success", "failed"), timeout=60)
    d.stop()
    log = job.log_text
    assert job.status == "failed", log
    assert job.failure_reason == "script_failure"
    assert "must not run" not in log
    assert git_server.auth_failures >= 1
    assert job.token not in log
    check_run(gitlab, d, [job])


class _TokenAfterFirstRefusal:
    """GitServer.token that refuses until one wrong-credentials request was seen."""

    def __init__(self, server, token):
        self.server, self.token = server, token

    def __iter__(self):
        return iter([self.token] if self.server.auth_failures >= 1 else ["not-yet"])


def test_get_sources_attempts_retries_a_failed_fetch(gitlab, daemons, git_server, tmp_path):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [builds_entry(gitlab, r, tmp_path)])
    job = source_job(gitlab, r, git_server, ["echo HEAD=$(git rev-parse HEAD)"],
                     variables={"GET_SOURCES_ATTEMPTS": "3"})
    git_server.token = _TokenAfterFirstRefusal(git_server, job.token)
    d.start()
    gitlab.wait_for_job(job, ("success", "failed"), timeout=60)
    d.stop()
    log = job.log_text
    assert job.status == "success", log
    assert log.count("Fetch failed, retrying...") == 1
    assert f"HEAD={git_server.repos.main_head}" in log
    assert git_server.auth_failures == 1
    check_run(gitlab, d, [job])


def test_hooks_checkout_and_stale_locks(gitlab, daemons, git_server, tmp_path):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [builds_entry(gitlab, r, tmp_path,
                                      pre_get_sources_script="echo CONFIG-PRE-HOOK",
                                      post_get_sources_script="echo CONFIG-POST-HOOK")])
    d.start()
    first = source_job(gitlab, r, git_server, ["touch .git/index.lock .git/shallow.lock"],
                       hooks=[{"name": "pre_get_sources_script", "script": ["echo JOB-PRE-HOOK"]},
                              {"name": "post_get_sources_script",
                               "script": ["echo JOB-POST-HOOK $(git rev-parse HEAD)"]}])
    gitlab.wait_for_job(first, ("success", "failed"), timeout=60)
    log = first.log_text
    assert first.status == "success", log
    order = [log.index(s) for s in ("CONFIG-PRE-HOOK", "Fetching changes", "CONFIG-POST-HOOK")]
    assert order == sorted(order), log
    assert log.index("JOB-PRE-HOOK") < log.index("Fetching changes")
    assert f"JOB-POST-HOOK {git_server.repos.main_head}" in log      # after the checkout

    # Locks a killed git left behind do not break the next fetch; GIT_CHECKOUT=false
    # fetches but leaves the work tree where it was.
    second = source_job(gitlab, r, git_server,
                        ["echo HEAD=$(git rev-parse HEAD)",
                         "git cat-file -e " + git_server.repos.feature_head + " && echo FETCHED"],
                        variables={"GIT_CHECKOUT": "false"}, sha=git_server.repos.feature_head,
                        refspecs=["+refs/heads/feature:refs/remotes/origin/feature"])
    gitlab.wait_for_job(second, ("success", "failed"), timeout=60)
    d.stop()
    log = second.log_text
    assert second.status == "success", log
    assert f"HEAD={git_server.repos.main_head}" in log
    assert "FETCHED" in log
    assert "Skipping Git checkout" in log
    check_run(gitlab, d, [first, second])


def test_recursive_submodules_limited_by_paths_and_clone_url(gitlab, daemons, git_server,
                                                             tmp_path):
    r = gitlab.add_runner(token=new_token())
    # clone_url overrides where the sources come from (here: the same server).
    d = daemons(gitlab, [builds_entry(gitlab, r, tmp_path, clone_url=git_server.url)])
    d.start()
    with_lib = source_job(gitlab, r, git_server, ["cat lib/lib.txt", "git config --file .git/config remote.origin.url"],
                          variables={"GIT_SUBMODULE_STRATEGY": "recursive",
                                     "GIT_SUBMODULE_PATHS": "lib"},
                          repo_url="http://gitlab.invalid/group/project.git")
    gitlab.wait_for_job(with_lib, ("success", "failed"), timeout=60)
    without = source_job(gitlab, r, git_server, ["ls lib | wc -l | sed 's/^/LIB=/'"],
                         variables={"GIT_SUBMODULE_STRATEGY": "recursive",
                                    "GIT_SUBMODULE_PATHS": ":(exclude)lib",
                                    "GIT_STRATEGY": "clone"},
                         repo_url="http://gitlab.invalid/group/project.git")
    gitlab.wait_for_job(without, ("success", "failed"), timeout=60)
    d.stop()
    assert with_lib.status == "success", with_lib.log_text
    assert "lib 2" in with_lib.log_text
    assert git_server.clean_url(git_server.repos.project) in with_lib.log_text, with_lib.log_text
    assert without.status == "success", without.log_text
    assert "LIB=0" in without.log_text
    check_run(gitlab, d, [with_lib, without])


def test_clean_flags_and_fetch_extra_flags(gitlab, daemons, git_server, tmp_path):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [builds_entry(gitlab, r, tmp_path)])
    d.start()
    first = source_job(gitlab, r, git_server, ["touch keep.me drop.me", "git tag | sed 's/^/TAG=/'"])
    gitlab.wait_for_job(first, ("success", "failed"), timeout=60)
    assert first.status == "success", first.log_text
    assert "TAG=v1.0" in first.log_text          # tags follow the fetched history by default

    second = source_job(gitlab, r, git_server,
                        ["test -e keep.me && echo KEPT", "test ! -e drop.me && echo DROPPED",
                         "touch left.alone"],
                        variables={"GIT_CLEAN_FLAGS": "-ffdx -e keep.me"})
    gitlab.wait_for_job(second, ("success", "failed"), timeout=60)
    assert second.status == "success", second.log_text
    assert "KEPT" in second.log_text and "DROPPED" in second.log_text

    third = source_job(gitlab, r, git_server,
                       ["test -e left.alone && echo NOT-CLEANED"],
                       variables={"GIT_CLEAN_FLAGS": "none", "GIT_STRATEGY": "fetch",
                                  "GIT_FETCH_EXTRA_FLAGS": "--no-tags --prune"})
    gitlab.wait_for_job(third, ("success", "failed"), timeout=60)
    d.stop()
    assert third.status == "success", third.log_text
    assert "NOT-CLEANED" in third.log_text
    check_run(gitlab, d, [first, second, third])


def test_no_tags_on_a_fresh_clone(gitlab, daemons, git_server, tmp_path):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [builds_entry(gitlab, r, tmp_path)])
    job = source_job(gitlab, r, git_server, ["git tag | wc -l | sed 's/^/TAGS=/'"],
                     variables={"GIT_FETCH_EXTRA_FLAGS": "--no-tags"})
    d.start()
    gitlab.wait_for_job(job, ("success", "failed"), timeout=60)
    d.stop()
    assert job.status == "success", job.log_text
    assert "TAGS=0" in job.log_text
    check_run(gitlab, d, [job])


def _git_version():
    import subprocess
    out = subprocess.run(["git", "version"], capture_output=True, text=True).stdout.split()[2]
    return tuple(int(x) for x in out.split(".")[:2])


def test_native_clone_feature_flag(gitlab, daemons, git_server, tmp_path):
    """FF_USE_GIT_NATIVE_CLONE from the job: git clone with GIT_CLONE_EXTRA_FLAGS on git
    2.49 and later, init and fetch before (Debian 12 has 2.39), as gitlab-runner does."""
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [builds_entry(gitlab, r, tmp_path)])
    job = source_job(gitlab, r, git_server,
                     ["echo HEAD=$(git rev-parse HEAD)", "git tag | wc -l | sed 's/^/TAGS=/'"],
                     variables={"FF_USE_GIT_NATIVE_CLONE": "true", "GIT_STRATEGY": "clone",
                                "GIT_CLONE_EXTRA_FLAGS": "--no-tags"})
    d.start()
    gitlab.wait_for_job(job, ("success", "failed"), timeout=60)
    d.stop()
    log = job.log_text
    assert job.status == "success", log
    assert f"HEAD={git_server.repos.main_head}" in log
    if _git_version() >= (2, 49):
        assert "Cloning repository for main with git depth set to 20..." in log
        assert "TAGS=0" in log
    else:
        assert "Cloning repository" not in log
        assert "Created fresh repository." in log
    assert job.token not in log
    check_run(gitlab, d, [job])


# How many credentials ~/.git-credentials holds for the job (0 when there is no file).
_STORED = "echo %s=$(cat ~/.git-credentials 2>/dev/null | grep -c gitlab-ci-token)"


@pytest.mark.parametrize("urls_without_tokens", ["default", "false"])
def test_a_credential_helper_of_the_user_keeps_no_job_token(gitlab, daemons, git_server,
                                                            tmp_path, urls_without_tokens):
    # A build user whose git saves every credential it uses (credential.helper
    # store).  By default the runner's own helper replaces the user's for the
    # GitLab host, so git never hands the store the token; with
    # FF_GIT_URLS_WITHOUT_TOKENS=false git stores the insteadOf URL's token
    # and the `git credential reject` at the end of get_sources erases it.
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[credential]\n\thelper = store\n")
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [builds_entry(gitlab, r, tmp_path)],
                env={"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")})
    variables = {} if urls_without_tokens == "default" else \
        {"FF_GIT_URLS_WITHOUT_TOKENS": urls_without_tokens}
    job = source_job(gitlab, r, git_server, ["echo HEAD=$(git rev-parse HEAD)",
                                             _STORED % "STORED_AFTER"],
                     variables=variables,
                     hooks=[{"name": "post_get_sources_script",
                             "script": [_STORED % "STORED_DURING"]}])
    d.start()
    gitlab.wait_for_job(job, ("success", "failed"), timeout=60)
    d.stop()
    log = job.log_text
    assert job.status == "success", log
    assert f"HEAD={git_server.repos.main_head}" in log
    if urls_without_tokens == "default":
        assert "STORED_DURING=0" in log, log
    else:
        # git did use the user's helper: the test can see a stored token.
        assert "STORED_DURING=1" in log, log
    assert "STORED_AFTER=0" in log, log
    store = home / ".git-credentials"
    assert not store.exists() or job.token not in store.read_text()
    check_run(gitlab, d, [job])
