"""No token and no masked value in the daemon's log, when GitLab's answer is refused.

A job payload that cannot be used is quoted in the error line, and it is
quoted before anything in it is known to be a secret: the job token, the
credentials in repo_url and the masked variables are registered as log
secrets only after a successful parse.  So every excerpt of a server text
passes api/redact.c first.  Each case here sends the daemon such a text
from the GitLab double and then reads the daemon's whole output, at the
default level and at --debug.

The job token has no known prefix (tokens of older GitLab versions have
none), so only the redaction of members and URLs can hide it.
"""
import secrets
import string

import pytest

from daemon_helpers import check_run, daemons, entry, new_token, without_sources  # noqa: F401
from gitlab_double import job_payload

_ALNUM = string.ascii_letters + string.digits
JOB_PAYLOAD_CAP = 32 * 1024 * 1024      # api/gitlab.c


def _secret(n=20):
    return "".join(secrets.choice(_ALNUM) for _ in range(n))


@pytest.fixture
def world(gitlab, daemons):
    """A runner, its daemon (not started) and the secrets of the job it will be given."""
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "one")])
    job_token = _secret(24)
    masked = "mAsKeD" + _secret(14)
    unsaid = "uNsAiD" + _secret(14)
    password = "pAsS" + _secret(16)
    variables = [
        {"key": "PUBLIC_NOTE", "value": "in plain sight"},
        {"key": "DEPLOY_SECRET", "value": masked, "public": False, "masked": True},
        {"key": "ANOTHER", "value": unsaid, "public": False, "masked": True},
    ]
    return {"runner": r, "daemon": d, "token": job_token, "masked": masked,
            "unsaid": unsaid, "password": password, "variables": variables}


def _start(d, debug):
    args = ["run", "-c", d.config, "-d", d.dir]
    d.start(args=(["--debug"] + args) if debug else args)


def _queue(gitlab, world, **payload):
    payload.setdefault("variables", world["variables"])
    payload.setdefault("credentials", [{"type": "registry", "url": "127.0.0.1:5000",
                                        "username": "deployer",
                                        "password": world["password"]}])
    payload["variables"] = without_sources(payload["variables"])
    return gitlab.add_job(job_payload(**payload), runner=world["runner"], token=world["token"],
                          update_interval=0)


def _assert_clean(world, needle):
    """The daemon's whole output: the refused text was quoted, and redacted."""
    d = world["daemon"]
    d.wait_log(needle, timeout=30)
    assert d.stop() == 0
    err = d.stderr
    assert "[REDACTED]" in err, f"nothing was redacted in:\n{d.tail()}"
    for name in ("token", "masked", "unsaid", "password"):
        value = world[name]
        for i in range(0, len(value) - 7):
            assert value[i:i + 8] not in err, \
                f"part of the {name} ({value[i:i + 8]}) is in the daemon's log:\n{d.tail()}"
    d.assert_no_tokens(extra=[world["token"]])


@pytest.mark.parametrize("debug", [False, True], ids=["info", "debug"])
def test_a_payload_cut_in_its_variables(gitlab, world, debug):
    job = _queue(gitlab, world)
    body_cut = {}

    def cut(body):
        # In the middle of the masked value: the object it is in never ends.
        at = body.index(world["masked"].encode()) + 7
        body_cut["body"] = body
        return at

    gitlab.script(method="POST", path=r"/jobs/request$", action="short_content_length",
                  cut=cut)
    _start(world["daemon"], debug)
    _assert_clean(world, r"payload cannot be used")
    # What was sent held the token and the repo URL (credentials come later).
    held = body_cut["body"][:cut(body_cut["body"])]
    assert world["token"].encode() in held and world["masked"][:7].encode() in held
    assert job.status == "running"      # GitLab assigned it; it times out there


@pytest.mark.parametrize("debug", [False, True], ids=["info", "debug"])
def test_a_201_with_a_content_length_shorter_than_its_body(gitlab, world, debug):
    _queue(gitlab, world)
    gitlab.script(method="POST", path=r"/jobs/request$", action="bad_content_length",
                  cut=lambda body: body.index(world["password"].encode()) + 9)
    _start(world["daemon"], debug)
    _assert_clean(world, r"payload cannot be used")


@pytest.mark.parametrize("debug", [False, True], ids=["info", "debug"])
def test_a_201_over_the_size_cap(gitlab, world, debug):
    big = {"key": "HUGE", "value": "x" * (JOB_PAYLOAD_CAP + 1024)}
    _queue(gitlab, world, variables=world["variables"] + [big])
    _start(world["daemon"], debug)
    _assert_clean(world, r"POST /api/v4/jobs/request: response larger than")


@pytest.mark.parametrize("debug", [False, True], ids=["info", "debug"])
def test_an_html_page_that_echoes_the_requests(gitlab, world, debug):
    job = _queue(gitlab, world, script=["echo note=$PUBLIC_NOTE"])
    gitlab.script(method="PATCH", path=r"/trace$", times=2, action="echo_html")
    gitlab.script(method="PUT", path=r"/jobs/\d+$", times=2, action="echo_html",
                  predicate=lambda req: b'"state":"success"' in req.body)
    _start(world["daemon"], debug)
    gitlab.wait_for_job(job, ("success",), timeout=60)
    _assert_clean(world, r"PUT /api/v4/jobs/\d+: HTTP 502.*body: <html>")
    check_run(gitlab, world["daemon"], [job])
