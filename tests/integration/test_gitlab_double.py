"""Self-tests of the GitLab double (tests/gitlab_double), with raw http.client.

The double is what every client test leans on, so its answers, its
rejections, its scripted faults and its violation detection are pinned
here without the C binary.
"""
import http.client
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import textwrap
import time
import types
import uuid
from contextlib import closing

import pytest

from double_fixtures import gitlab, gitlab_factory, gitlab_tls, tls_files  # noqa: F401
from gitlab_double import GitLabDouble, certs

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(TESTS, "integration")
TOKEN = "glrt-t1_AbCdEfGhIjKlMnOpQrSt"
REG = "GR1348941abcdefghijklmnop"
PAT = "glpat-0123456789abcdefghij"
SYSTEM_ID = "s_0123456789ab"


class Resp:
    def __init__(self, r):
        self.status = r.status
        self.headers = r.headers
        self.body = r.read()

    def json(self):
        assert self.headers.get("Content-Type") == "application/json"
        return json.loads(self.body)


def connect(d, context=None, timeout=5):
    if d.tls:
        return http.client.HTTPSConnection(d.host, d.port, timeout=timeout, context=context)
    return http.client.HTTPConnection(d.host, d.port, timeout=timeout)


def send(d, method, path, body=None, headers=None, conn=None, token_header=True):
    """One well-behaved request (a dict body is JSON; the Runner-Token header
    mirrors body["token"] unless token_header=False); headers set to None are removed."""
    h = {"X-Request-Id": uuid.uuid4().hex, "User-Agent": "runner 0.1 (test)",
         "Accept": "application/json"}
    if isinstance(body, dict):
        if token_header and "token" in body:
            h["Runner-Token"] = body["token"]
        h["Content-Type"] = "application/json"
        body = json.dumps(body)
    h.update(headers or {})
    h = {k: v for k, v in h.items() if v is not None}
    own = conn is None
    c = conn or connect(d)
    try:
        c.request(method, "/api/v4/" + path.lstrip("/"), body=body, headers=h)
        return Resp(c.getresponse())
    finally:
        if own:
            c.close()


@pytest.fixture
def double():
    """A double whose violations the test inspects itself."""
    d = GitLabDouble().start()
    yield d
    d.stop()
    assert d.errors == []


# --- registration and tokens ------------------------------------------------

def test_register_creates_a_runner(gitlab):
    gitlab.registration_tokens.add(REG)
    r = send(gitlab, "POST", "runners", {"token": REG, "description": "ci box",
                                         "tag_list": "a, b", "locked": True,
                                         "run_untagged": False, "paused": False,
                                         "access_level": "not_protected",
                                         "maximum_timeout": 3600, "info": {"name": "runner"}})
    assert r.status == 201
    j = r.json()
    assert set(j) == {"id", "token", "token_expires_at"} and j["token_expires_at"] is None
    assert not j["token"].startswith("glrt-") and j["token"] != REG
    runner = gitlab.runners[j["id"]]
    assert runner.token == j["token"] and runner.tag_list == ["a", "b"]
    assert runner.description == "ci box"
    assert send(gitlab, "POST", "runners/verify", {"token": j["token"]}).status == 200


def test_register_rejections(double):
    double.registration_tokens.add(REG)
    r = send(double, "POST", "runners", {"token": "GR1348941wrong"})
    assert (r.status, r.json()) == (403, {"message": "403 Forbidden"})
    r = send(double, "POST", "runners", {"token": REG, "description": 5, "tag_list": [1]})
    assert (r.status, r.json()) == (400, {"error": "description is invalid, tag_list is invalid"})
    r = send(double, "POST", "runners", {"token": REG, "access_level": "everything"})
    assert r.json() == {"error": "access_level does not have a valid value"}
    double.legacy_registration_disabled = True
    r = send(double, "POST", "runners", {"token": REG})
    assert r.status == 410 and "disallowed" in r.json()["message"]
    assert double.runners == {}
    assert len(double.violations) == 2  # the two invalid-parameter requests


def test_verify_records_system_id_and_rejects_unknown(gitlab):
    runner = gitlab.add_runner(token=TOKEN, id=17, expires_at="2027-01-01T00:00:00Z")
    r = send(gitlab, "POST", "runners/verify", {"token": TOKEN, "system_id": SYSTEM_ID,
                                                "info": {"executor": "shell"}})
    assert (r.status, r.json()) == (200, {"id": 17, "token": TOKEN,
                                          "token_expires_at": "2027-01-01T00:00:00Z"})
    assert runner.system_ids == {SYSTEM_ID} and runner.info == {"executor": "shell"}
    assert send(gitlab, "POST", "runners/verify", {"token": "glrt-nope"}).status == 403


def test_expired_token_is_forbidden(gitlab):
    gitlab.add_runner(token=TOKEN, expires_at="2020-01-01T00:00:00Z")
    assert send(gitlab, "POST", "runners/verify", {"token": TOKEN}).status == 403
    assert send(gitlab, "POST", "jobs/request", {"token": TOKEN}).status == 403


def test_unregister_deletes_the_runner(gitlab):
    gitlab.add_runner(token=TOKEN, id=3)
    r = send(gitlab, "DELETE", "runners", {"token": TOKEN}, headers={"Accept": None})
    assert (r.status, r.body, r.headers.get("Content-Length")) == (204, b"", None)
    assert gitlab.runners == {}
    r = send(gitlab, "DELETE", "runners", {"token": TOKEN}, headers={"Accept": None})
    assert (r.status, r.json()) == (403, {"message": "403 Forbidden"})


def test_unregister_manager(double):
    runner = double.add_runner(token=TOKEN)
    send(double, "POST", "runners/verify", {"token": TOKEN, "system_id": SYSTEM_ID})
    other = "s_ba9876543210"
    r = send(double, "DELETE", "runners/managers", {"token": TOKEN, "system_id": other})
    assert (r.status, r.json()) == (404, {"message": "404 Runner manager not found"})
    r = send(double, "DELETE", "runners/managers", {"token": TOKEN, "system_id": SYSTEM_ID})
    assert r.status == 204 and runner.system_ids == set() and runner.id in double.runners
    r = send(double, "DELETE", "runners/managers", {"token": "glrt-bad", "system_id": SYSTEM_ID})
    assert r.status == 403
    assert double.violations == []
    r = send(double, "DELETE", "runners/managers", {"token": TOKEN})
    assert (r.status, r.json()) == (400, {"error": "system_id is missing"})
    assert double.violations == [
        "DELETE /api/v4/runners/managers: rejected parameters: system_id is missing"]


def test_reset_token_replaces_the_token(gitlab):
    runner = gitlab.add_runner(token=TOKEN)
    gitlab.token_expires_in = 3600
    r = send(gitlab, "POST", "runners/reset_authentication_token", {"token": TOKEN},
             token_header=False)
    assert r.status == 201
    j = r.json()
    assert j["token"].startswith("glrt-") and j["token"] != TOKEN and runner.token == j["token"]
    assert j["token_expires_at"].endswith("Z")
    assert send(gitlab, "POST", "runners/verify", {"token": TOKEN}).status == 403
    assert send(gitlab, "POST", "runners/verify", {"token": j["token"]}).status == 200
    assert send(gitlab, "POST", "runners/reset_authentication_token", {"token": TOKEN},
                token_header=False).status == 403
    # A Runner-Token header there is fine when it is the body token.
    assert send(gitlab, "POST", "runners/reset_authentication_token",
                {"token": j["token"]}).status == 201


def test_reset_token_with_mismatched_header_is_a_violation(double):
    double.add_runner(token=TOKEN)
    r = send(double, "POST", "runners/reset_authentication_token", {"token": TOKEN},
             headers={"Runner-Token": "glrt-other"})
    assert r.status == 400 and r.json()["message"].startswith("double: ")
    assert double.violations == ["POST /api/v4/runners/reset_authentication_token: "
                                 "Runner-Token header differs from the body token"]


def test_reset_token_with_pat(double):
    runner = double.add_runner(token=TOKEN, id=17)
    double.pats[PAT] = True
    double.pats["glpat-readonly-xxxxxx"] = False
    path = "runners/17/reset_authentication_token"
    r = send(double, "POST", path, headers={"Private-Token": PAT})
    assert r.status == 201 and r.json()["token"] == runner.token != TOKEN
    assert (send(double, "POST", path).status, send(double, "POST", path).json()) == \
        (401, {"message": "401 Unauthorized"})
    assert send(double, "POST", path, headers={"Private-Token": "glpat-unknown-xxxx"}).status == 401
    assert send(double, "POST", path,
                headers={"Private-Token": "glpat-readonly-xxxxxx"}).status == 403
    r = send(double, "POST", "runners/99/reset_authentication_token",
             headers={"Private-Token": PAT})
    assert (r.status, r.json()) == (404, {"message": "404 Runner Not Found"})
    assert double.violations == []
    r = send(double, "POST", path, headers={"Private-Token": PAT, "Runner-Token": runner.token})
    assert r.status == 400
    assert double.violations == ["POST /api/v4/runners/17/reset_authentication_token: "
                                 "Runner-Token header on the PAT reset (Private-Token only)"]


# --- router discovery and job request ----------------------------------------

def test_router_discovery(double):
    double.add_runner(token=TOKEN)
    h = {"Runner-Token": TOKEN}
    r = send(double, "GET", "runners/router/discovery", headers=h)
    assert (r.status, r.json()) == (501, {
        "message": "Job Router is not available. Please contact your administrator."})
    double.router_url = "wss://kas.example/-/k/"
    r = send(double, "GET", "runners/router/discovery", headers=h)
    assert (r.status, r.json()) == (200, {"server_url": "wss://kas.example/-/k/"})
    r = send(double, "GET", "runners/router/discovery", headers={"Runner-Token": "glrt-bad"})
    assert r.status == 403
    assert double.violations == []
    r = send(double, "GET", "runners/router/discovery")
    assert r.status == 400
    assert double.violations == [
        "GET /api/v4/runners/router/discovery: Runner-Token header missing"]


def test_job_request_no_job_and_last_update(gitlab):
    runner = gitlab.add_runner(token=TOKEN)
    r = send(gitlab, "POST", "jobs/request", {"token": TOKEN, "system_id": SYSTEM_ID})
    value = r.headers["X-GitLab-Last-Update"]
    assert r.status == 204 and r.body == b"" and len(value) == 32
    assert int(value, 16) >= 0 and value == runner.queue_value
    assert SYSTEM_ID in runner.system_ids
    r = send(gitlab, "POST", "jobs/request",
             {"token": TOKEN, "system_id": SYSTEM_ID, "last_update": value})
    assert (r.status, r.headers["X-GitLab-Last-Update"]) == (204, value)
    gitlab.tick_queue(runner)
    r = send(gitlab, "POST", "jobs/request",
             {"token": TOKEN, "system_id": SYSTEM_ID, "last_update": value})
    assert r.status == 204 and r.headers["X-GitLab-Last-Update"] != value
    assert send(gitlab, "POST", "jobs/request", {"token": "glrt-nope"}).status == 403


def test_missing_token_is_400(double):
    r = send(double, "POST", "jobs/request", {"system_id": SYSTEM_ID},
             headers={"Runner-Token": TOKEN})
    assert (r.status, r.json()) == (400, {"error": "token is missing"})
    assert double.violations == ["POST /api/v4/jobs/request: rejected parameters: "
                                 "token is missing"]


def test_catch_all_404_and_405(gitlab):
    r = send(gitlab, "GET", "projects/1")
    assert (r.status, r.json()) == (404, {"message": "404 Not Found"})
    r = send(gitlab, "GET", "jobs/request")
    assert r.status == 405 and r.headers["Allow"] == "POST"
    assert send(gitlab, "GET", "runners").headers["Allow"] == "POST, DELETE"


# --- strictness: bodies, headers, tokens -------------------------------------

def test_bad_json_and_wrong_content_type(double):
    double.add_runner(token=TOKEN)
    h = {"Runner-Token": TOKEN, "Content-Type": "application/json"}
    r = send(double, "POST", "runners/verify", b'{"token": ', headers=h)
    assert (r.status, r.json()) == (400, {"error": "message body does not match declared format"})
    r = send(double, "POST", "runners/verify", json.dumps({"token": TOKEN}),
             headers={"Runner-Token": TOKEN, "Content-Type": "text/plain"})
    assert (r.status, r.json()) == (400, {"error": "token is missing"})
    r = send(double, "POST", "runners/verify", json.dumps({"token": TOKEN}),
             headers=dict(h, **{"Content-Type": "application/json; charset=utf-8"}))
    assert r.status == 200
    v = double.violations
    assert len(v) == 3, v
    assert v[0].startswith("POST /api/v4/runners/verify: body is not a JSON object")
    assert v[1] == ("POST /api/v4/runners/verify: Content-Type 'text/plain' on a JSON endpoint "
                    "(expected application/json)")


def test_missing_runner_token_header(double):
    double.add_runner(token=TOKEN)
    r = send(double, "POST", "runners/verify", {"token": TOKEN}, token_header=False)
    assert (r.status, r.json()) == (400, {"message": "double: Runner-Token header missing"})
    r = send(double, "POST", "jobs/request", {"token": TOKEN}, headers={"Runner-Token": "x"})
    assert r.status == 400
    assert double.violations == [
        "POST /api/v4/runners/verify: Runner-Token header missing",
        "POST /api/v4/jobs/request: Runner-Token header differs from the body token"]


def test_private_token_on_a_runner_endpoint_is_401(double):
    double.add_runner(token=TOKEN)
    r = send(double, "POST", "jobs/request", {"token": TOKEN}, headers={"Private-Token": TOKEN})
    assert (r.status, r.json()) == (401, {"message": "401 Unauthorized"})
    assert double.violations == [
        "POST /api/v4/jobs/request: Private-Token header sent; only POST /runners/:id/"
        "reset_authentication_token takes one (GitLab answers 401)"]


def test_job_token_on_a_runner_endpoint(double):
    double.add_runner(token=TOKEN)
    r = send(double, "POST", "jobs/request", {"token": TOKEN}, headers={"Job-Token": "glcbt-x"})
    assert r.status == 400
    assert double.violations == ["POST /api/v4/jobs/request: Job-Token header on a runner endpoint"]


def test_token_in_query_string(double):
    double.add_runner(token=TOKEN)
    double.registration_tokens.add(REG)
    r = send(double, "POST", f"runners/verify?token={TOKEN}", {"token": TOKEN})
    assert r.status == 200
    send(double, "GET", f"projects/{REG}")
    assert double.violations == [
        "POST /api/v4/runners/verify: the token of runner 1000 appears in the URL query string",
        f"GET /api/v4/projects/{REG}: a registration token appears in the URL path"]


def test_request_id_user_agent_and_expect(double):
    double.add_runner(token=TOKEN)
    body = {"token": TOKEN}
    r = send(double, "POST", "runners/verify", body, headers={"X-Request-Id": "ABC-123"})
    assert r.headers["X-Request-Id"] == "ABC-123"
    r = send(double, "POST", "runners/verify", body, headers={"X-Request-Id": None})
    assert len(r.headers["X-Request-Id"]) == 32
    send(double, "POST", "runners/verify", body, headers={"User-Agent": "gitlab-runner 19.4.0"})
    send(double, "POST", "runners/verify", body, headers={"Expect": "100-continue"})
    send(double, "POST", "runners/verify", body, headers={"Accept": None})
    p = "POST /api/v4/runners/verify: "
    assert double.violations == [
        p + "X-Request-Id 'ABC-123' is not 32 lowercase hex characters",
        p + "X-Request-Id header missing",
        p + "User-Agent 'gitlab-runner 19.4.0' does not start with 'runner '",
        p + "Expect: 100-continue sent (the client must never send Expect)",
        p + "Accept: application/json missing (the answer is JSON)"]
    assert [r.response_status for r in double.requests] == [200] * 5


def test_request_id_is_echoed(gitlab):
    rid = uuid.uuid4().hex
    assert send(gitlab, "GET", "nothing", headers={"X-Request-Id": rid}).headers[
        "X-Request-Id"] == rid
    assert gitlab.requests[0].headers["x-request-id"] == rid


def test_chunked_json_body_is_read_and_flagged(double):
    double.add_runner(token=TOKEN)
    c = connect(double)
    c.putrequest("POST", "/api/v4/runners/verify")
    for k, v in {"X-Request-Id": uuid.uuid4().hex, "User-Agent": "runner t",
                 "Accept": "application/json", "Content-Type": "application/json",
                 "Runner-Token": TOKEN, "Transfer-Encoding": "chunked"}.items():
        c.putheader(k, v)
    c.endheaders()
    data = json.dumps({"token": TOKEN}).encode()
    for part in (data[:5], data[5:]):
        c.send(b"%x\r\n%s\r\n" % (len(part), part))
    c.send(b"0\r\n\r\n")
    assert c.getresponse().status == 200
    c.close()
    assert double.requests[0].body == data and double.requests[0].chunked
    assert double.violations == [
        "POST /api/v4/runners/verify: JSON body sent chunked (Content-Length expected)"]


# --- scripted faults ---------------------------------------------------------

def test_script_429_twice_then_normal(gitlab):
    gitlab.add_runner(token=TOKEN)
    rule = gitlab.script(method="POST", path=r"^/api/v4/jobs/request$", times=2, status=429,
                         headers={"Retry-After": "2"}, body=b'{"message":"slow down"}')
    body = {"token": TOKEN}
    answers = [send(gitlab, "POST", "jobs/request", body) for _ in range(3)]
    assert [a.status for a in answers] == [429, 429, 204]
    assert answers[0].headers["Retry-After"] == "2" and answers[0].json() == {"message": "slow down"}
    assert answers[0].headers["X-Request-Id"]
    assert rule.used == 2
    assert [r.response_status for r in gitlab.requests_for("POST", "jobs/request")] == \
        [429, 429, 204]


def test_script_matches_method_path_and_predicate_in_order(gitlab):
    gitlab.add_runner(token=TOKEN)
    gitlab.script(method="GET", path="verify", status=500)        # wrong method: never used
    gitlab.script(path="verify", status=503, predicate=lambda r: "x=1" in r.query)
    gitlab.script(path="verify", status=502)
    codes = [send(gitlab, "POST", "runners/verify", {"token": TOKEN}).status,
             send(gitlab, "POST", "runners/verify?x=1", {"token": TOKEN}).status,
             send(gitlab, "POST", "runners/verify?x=1", {"token": TOKEN}).status]
    assert codes == [502, 503, 200]


def test_script_drop(gitlab):
    gitlab.add_runner(token=TOKEN)
    gitlab.script(path="verify", action="drop")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        send(gitlab, "POST", "runners/verify", {"token": TOKEN})
    assert send(gitlab, "POST", "runners/verify", {"token": TOKEN}).status == 200
    assert [r.response_status for r in gitlab.requests] == [None, 200]


def test_script_drop_mid_body(gitlab):
    gitlab.add_runner(token=TOKEN)
    rule = gitlab.script(path="verify", action="drop_mid_body")
    big = {"token": TOKEN, "info": {"name": "x" * (1 << 20)}}
    with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
        send(gitlab, "POST", "runners/verify", big)
    gitlab.wait_for(lambda: gitlab.requests)
    [req] = gitlab.requests
    assert rule.used == 1 and req.response_status is None and not req.complete
    assert 0 < len(req.body) < len(json.dumps(big))
    assert send(gitlab, "POST", "runners/verify", big).status == 200


def test_script_drop_after_headers_truncates_the_body(gitlab):
    gitlab.add_runner(token=TOKEN, id=17)
    gitlab.script(path="verify", action="drop_after_headers")
    c = connect(gitlab)
    c.request("POST", "/api/v4/runners/verify", body=json.dumps({"token": TOKEN}), headers={
        "X-Request-Id": uuid.uuid4().hex, "User-Agent": "runner t", "Runner-Token": TOKEN,
        "Accept": "application/json", "Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200
    length = int(r.headers["Content-Length"])
    with pytest.raises(http.client.IncompleteRead) as e:
        r.read()
    assert 0 < len(e.value.partial) < length
    c.close()


def _raw_verify(gitlab):
    """POST /runners/verify on a socket of its own; returns (head, body) as received."""
    body = json.dumps({"token": TOKEN})
    s = socket.create_connection(("127.0.0.1", gitlab.port), timeout=5)
    s.sendall((f"POST /api/v4/runners/verify HTTP/1.1\r\nHost: x\r\n"
               f"X-Request-Id: {uuid.uuid4().hex}\r\nUser-Agent: runner t\r\n"
               f"Runner-Token: {TOKEN}\r\nAccept: application/json\r\n"
               f"Content-Type: application/json\r\nConnection: close\r\n"
               f"Content-Length: {len(body)}\r\n\r\n"
               f"{body}").encode())
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode(), rest


def _content_length(head):
    return int(re.search(r"(?im)^Content-Length: *(\d+)", head).group(1))


def test_script_short_content_length_sends_a_cut_body_that_looks_whole(gitlab):
    gitlab.add_runner(token=TOKEN, id=17)
    gitlab.script(path="verify", action="short_content_length", cut=lambda body: 5)
    head, body = _raw_verify(gitlab)
    assert head.startswith("HTTP/1.1 200") and _content_length(head) == 5 and len(body) == 5


def test_script_bad_content_length_sends_more_than_it_declares(gitlab):
    gitlab.add_runner(token=TOKEN, id=17)
    gitlab.script(path="verify", action="bad_content_length", cut=3)
    head, body = _raw_verify(gitlab)
    assert _content_length(head) == 3 and len(body) > 3
    assert json.loads(body)["id"] == 17


def test_script_echo_html_quotes_the_request(gitlab):
    gitlab.add_runner(token=TOKEN, id=17)
    gitlab.script(path="verify", action="echo_html")
    head, body = _raw_verify(gitlab)
    page = body.decode()
    assert head.startswith("HTTP/1.1 502") and "Content-Type: text/html" in head
    assert "POST /api/v4/runners/verify" in page and f"Runner-Token: {TOKEN}" in page
    assert f"{{&quot;token&quot;: &quot;{TOKEN}&quot;}}" in page


def test_script_drop_after_handling_runs_the_endpoint(gitlab):
    runner = gitlab.add_runner(token=TOKEN)
    gitlab.script(path="reset_authentication_token", action="drop_after_handling")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        send(gitlab, "POST", "runners/reset_authentication_token", {"token": TOKEN})
    assert runner.token != TOKEN  # reset happened; the client never heard of it


def test_script_delay(gitlab):
    gitlab.add_runner(token=TOKEN)
    gitlab.script(path="verify", delay=0.3)
    start = time.monotonic()
    assert send(gitlab, "POST", "runners/verify", {"token": TOKEN}).status == 200
    assert time.monotonic() - start >= 0.3
    start = time.monotonic()
    send(gitlab, "POST", "runners/verify", {"token": TOKEN})
    assert time.monotonic() - start < 0.25


def test_storm(gitlab):
    gitlab.add_runner(token=TOKEN)
    gitlab.storm(seconds=1, status=429, headers={"Retry-After": "1"})
    r = send(gitlab, "POST", "jobs/request", {"token": TOKEN})
    assert (r.status, r.headers["Retry-After"]) == (429, "1")
    assert send(gitlab, "GET", "anything").status == 429
    gitlab.wait_for(lambda: send(gitlab, "POST", "jobs/request", {"token": TOKEN}).status == 204,
                    timeout=2, interval=0.1)


# --- connections ---------------------------------------------------------------

def test_keep_alive_two_requests_on_one_connection(gitlab):
    gitlab.add_runner(token=TOKEN)
    c = connect(gitlab)
    assert send(gitlab, "POST", "jobs/request", {"token": TOKEN}, conn=c).status == 204
    assert send(gitlab, "POST", "runners/verify", {"token": TOKEN}, conn=c).status == 200
    assert send(gitlab, "GET", "nothing", conn=c).status == 404
    c.close()
    conns = {r.connection for r in gitlab.requests}
    assert len(conns) == 1 and gitlab.max_open_connections == 1


def test_open_connections_counting(gitlab):
    socks = [socket.create_connection((gitlab.host, gitlab.port), timeout=5) for _ in range(3)]
    gitlab.wait_for(lambda: gitlab.open_connections == 3, timeout=2)
    for s in socks:
        s.close()
    gitlab.wait_for(lambda: gitlab.open_connections == 0, timeout=2)
    assert gitlab.max_open_connections == 3


def test_stop_closes_idle_and_delayed_connections():
    d = GitLabDouble().start()
    d.add_runner(token=TOKEN)
    idle = socket.create_connection((d.host, d.port), timeout=5)
    d.script(path="verify", delay=30)
    c = connect(d)
    c.request("POST", "/api/v4/runners/verify", body=json.dumps({"token": TOKEN}), headers={
        "X-Request-Id": uuid.uuid4().hex, "User-Agent": "runner t", "Runner-Token": TOKEN,
        "Accept": "application/json", "Content-Type": "application/json"})
    d.wait_for(lambda: d.requests, timeout=2)
    start = time.monotonic()
    d.stop()
    assert time.monotonic() - start < 1.5
    assert d.open_connections == 0
    assert idle.recv(10) == b""
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        c.getresponse()
    c.close()
    idle.close()
    assert d.requests[0].response_status is None
    d.stop()  # idempotent


# --- TLS ----------------------------------------------------------------------

def test_tls_handshake_with_the_ca(gitlab_tls, tls_files):
    assert gitlab_tls.url.startswith("https://127.0.0.1:")
    ctx = ssl.create_default_context(cafile=tls_files.ca_cert)
    with closing(connect(gitlab_tls, ctx)) as c:
        assert send(gitlab_tls, "GET", "nothing", conn=c).status == 404
    ctx.check_hostname = True
    c = http.client.HTTPSConnection("localhost", gitlab_tls.port, timeout=5, context=ctx)
    c.request("GET", "/api/v4/x", headers={"X-Request-Id": uuid.uuid4().hex,
                                           "User-Agent": "runner t"})
    assert c.getresponse().status == 404
    c.close()


def test_tls_handshakes_and_accepted_connections_are_counted(gitlab_tls, tls_files):
    ctx = ssl.create_default_context(cafile=tls_files.ca_cert)
    with closing(connect(gitlab_tls, ctx)) as c:
        assert send(gitlab_tls, "GET", "nothing", conn=c).status == 404
        assert send(gitlab_tls, "GET", "nothing", conn=c).status == 404
    assert (gitlab_tls.accepted_connections, gitlab_tls.tls_handshakes) == (1, 1)
    with closing(connect(gitlab_tls, ctx)) as c:
        assert send(gitlab_tls, "GET", "nothing", conn=c).status == 404
    assert (gitlab_tls.accepted_connections, gitlab_tls.tls_handshakes) == (2, 2)
    assert gitlab_tls.tls_resumed <= 1
    # A refused handshake is accepted but not completed.
    with pytest.raises(ssl.SSLCertVerificationError), \
            closing(connect(gitlab_tls, ssl.create_default_context())) as c:
        send(gitlab_tls, "GET", "nothing", conn=c)
    gitlab_tls.wait_for(lambda: gitlab_tls.tls_failures, timeout=2)
    assert (gitlab_tls.accepted_connections, gitlab_tls.tls_handshakes) == (3, 2)


def test_tls_rejected_without_the_ca(gitlab_tls):
    with pytest.raises(ssl.SSLCertVerificationError), \
            closing(connect(gitlab_tls, ssl.create_default_context())) as c:
        send(gitlab_tls, "GET", "nothing", conn=c)
    gitlab_tls.wait_for(lambda: gitlab_tls.tls_failures, timeout=2)
    assert gitlab_tls.requests == []


def test_client_certificate_required(gitlab_factory, tls_files):
    d = gitlab_factory(tls=tls_files, require_client_cert=True)
    ctx = ssl.create_default_context(cafile=tls_files.ca_cert)
    with pytest.raises((ssl.SSLError, ConnectionError)), closing(connect(d, ctx)) as c:
        send(d, "GET", "nothing", conn=c)
    ctx.load_cert_chain(tls_files.client_cert, tls_files.client_key)
    with closing(connect(d, ctx)) as c:
        assert send(d, "GET", "nothing", conn=c).status == 404
    assert d.requests[-1].client_cert == "runner test client"


def test_certs_are_fresh_and_complete(tmp_path):
    start = time.monotonic()
    files = certs.generate(tmp_path)
    assert time.monotonic() - start < 2
    assert certs.existing(tmp_path) == files
    out = subprocess.run(["openssl", "x509", "-in", files.server_cert, "-noout", "-ext",
                          "subjectAltName"], capture_output=True, text=True).stdout
    assert "IP Address:127.0.0.1" in out and "DNS:localhost" in out and "0:0:0:0:0:0:0:1" in out
    ok = subprocess.run(["openssl", "verify", "-CAfile", files.ca_cert, files.server_cert,
                         files.client_cert], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr


# --- the fixtures and standalone mode ------------------------------------------

def test_fixtures_fail_on_violations_unless_marked(tmp_path):
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {HERE!r})\nfrom double_fixtures import *\n")
    (tmp_path / "test_it.py").write_text(textwrap.dedent("""
        import http.client
        import pytest

        def get(d, headers):
            c = http.client.HTTPConnection(d.host, d.port, timeout=5)
            c.request("GET", "/api/v4/x", headers=headers)
            return c.getresponse().status

        def test_clean(gitlab):
            assert get(gitlab, {"X-Request-Id": "0" * 32, "User-Agent": "runner t"}) == 404

        def test_dirty(gitlab):
            get(gitlab, {})

        @pytest.mark.allow_violations
        def test_dirty_allowed(gitlab):
            get(gitlab, {})
    """))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--strict-markers", str(tmp_path)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60)
    assert "3 passed, 1 error" in proc.stdout, proc.stdout + proc.stderr
    assert "X-Request-Id header missing" in proc.stdout


def test_standalone_mode(tmp_path):
    port_file, log = tmp_path / "port", tmp_path / "requests.jsonl"
    env = dict(os.environ, PYTHONPATH=TESTS)
    proc = subprocess.Popen([sys.executable, "-m", "gitlab_double", "--port-file", str(port_file),
                             "--runner", f"{TOKEN}:17", "--registration-token", REG,
                             "--requests-log", str(log)], env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while not port_file.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        url = port_file.read_text().strip()
        assert url.startswith("http://127.0.0.1:")

        target = types.SimpleNamespace(host="127.0.0.1", port=int(url.rsplit(":", 1)[1]),
                                       tls=None)
        r = send(target, "POST", "runners/verify", {"token": TOKEN})
        assert r.json()["id"] == 17
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(lines) == 1
    assert lines[0]["method"] == "POST" and lines[0]["path"] == "/api/v4/runners/verify"
    assert lines[0]["status"] == 200 and json.loads(lines[0]["body"]) == {"token": TOKEN}
    assert ["Runner-Token", TOKEN] in lines[0]["headers"]
