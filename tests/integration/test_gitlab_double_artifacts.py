"""Self-tests of the GitLab double's artifacts (tests/gitlab_double/artifacts.py),
with raw http.client and sockets: uploads (auth, strict multipart, 413,
report formats, chunked bodies, scripted faults, 307 redirects, a drop
mid-body), downloads (dependency and running-job tokens, 302 to the
double's object storage) and the storage's refusal of any token.

The runner's artifact tests lean on these behaviours; pinning them here
means a failing runner test points at the runner, not at the double.
"""
import gzip
import hashlib
import http.client
import io
import json
import socket
import uuid
import zipfile
from urllib.parse import urlsplit

import pytest

from double_fixtures import gitlab, gitlab_factory  # noqa: F401
from gitlab_double import GitLabDouble, parse_multipart

TOKEN = "glrt-t1_AbCdEfGhIjKlMnOpQrSt"
SYSTEM_ID = "s_0123456789ab"
ARCHIVE_QUERY = "artifact_format=zip&artifact_type=archive&expire_in=1+week"


def zip_bytes(files=None):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in (files or {"out/a.txt": b"hello\n"}).items():
            z.writestr(name, data)
    return buf.getvalue()


class Resp:
    def __init__(self, r):
        self.status = r.status
        self.headers = r.headers
        self.body = r.read()

    def json(self):
        return json.loads(self.body)


def base_headers():
    return {"X-Request-Id": uuid.uuid4().hex, "User-Agent": "runner 0.1 (test)"}


def call(target, method, target_path, body=None, headers=None, timeout=5):
    """One request on a fresh connection; target_path is the path and query as sent."""
    h = base_headers()
    h.update(headers or {})
    c = http.client.HTTPConnection(target.host, target.port, timeout=timeout)
    try:
        c.request(method, target_path, body=body, headers=h)
        return Resp(c.getresponse())
    finally:
        c.close()


def multipart(data, filename="artifacts.zip", boundary="b0undary-0123456789abcdef",
              name="file", ctype="application/octet-stream"):
    """(body, Content-Type) as the runner builds them: one "file" part."""
    head = f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"'
    if filename is not None:
        head += f'; filename="{filename}"'
    head += "\r\n"
    if ctype is not None:
        head += f"Content-Type: {ctype}\r\n"
    body = head.encode() + b"\r\n" + data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def upload(target, job, data=None, query=ARCHIVE_QUERY, token=None, body=None, ctype=None,
           headers=None, prefix=""):
    """POST /jobs/:id/artifacts with a Job-Token header (token=False: none)."""
    if body is None:
        body, ctype = multipart(zip_bytes() if data is None else data)
    h = {"Content-Type": ctype} if ctype else {}
    if token is not False:
        h["Job-Token"] = token or job.token
    h.update(headers or {})
    path = f"{prefix}/api/v4/jobs/{job.id}/artifacts" + (f"?{query}" if query else "")
    return call(target, "POST", path, body, h)


def upload_chunked(d, job, body, ctype, chunk=7, query=ARCHIVE_QUERY):
    """The same upload with Transfer-Encoding: chunked, over a raw socket."""
    s = socket.create_connection((d.host, d.port), timeout=5)
    try:
        head = (f"POST /api/v4/jobs/{job.id}/artifacts?{query} HTTP/1.1\r\n"
                f"Host: {d.host}:{d.port}\r\nX-Request-Id: {uuid.uuid4().hex}\r\n"
                f"User-Agent: runner 0.1 (test)\r\nJob-Token: {job.token}\r\n"
                f"Content-Type: {ctype}\r\nTransfer-Encoding: chunked\r\n"
                "Connection: close\r\n\r\n").encode()
        s.sendall(head)
        for i in range(0, len(body), chunk):
            piece = body[i:i + chunk]
            s.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
        s.sendall(b"0\r\n\r\n")
        r = http.client.HTTPResponse(s)
        r.begin()
        return Resp(r)
    finally:
        s.close()


def download(target, job_id, token, query="", headers=None):
    h = {} if token is None else {"Job-Token": token}
    h.update(headers or {})
    return call(target, "GET", f"/api/v4/jobs/{job_id}/artifacts" + (f"?{query}" if query
                                                                      else ""), None, h)


def get_url(url, headers=None, request_id=False):
    """GET an absolute URL of the double as an object-storage client would."""
    parts = urlsplit(url)
    c = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    try:
        h = {"User-Agent": "runner 0.1 (test)"}
        if request_id:
            h["X-Request-Id"] = uuid.uuid4().hex
        h.update(headers or {})
        c.request("GET", parts.path + ("?" + parts.query if parts.query else ""), headers=h)
        return Resp(c.getresponse())
    finally:
        c.close()


def request_job(d, token=TOKEN):
    return call(d, "POST", "/api/v4/jobs/request",
                json.dumps({"token": token, "system_id": SYSTEM_ID}),
                {"Runner-Token": token, "Accept": "application/json",
                 "Content-Type": "application/json"})


def picked_job(d, **kwargs):
    """A running job the client got through POST /jobs/request."""
    if d.runner(TOKEN) is None:
        d.add_runner(token=TOKEN, id=17)
    job = d.add_job(**kwargs)
    r = request_job(d)
    assert r.status == 201 and r.json()["id"] == job.id
    return job


@pytest.fixture
def double():
    """A double whose violations the test inspects itself."""
    d = GitLabDouble().start()
    yield d
    d.stop()
    assert d.errors == []


# --- upload (protocol.md 7.1) ------------------------------------------------

def test_upload_stores_the_archive_and_answers_201(gitlab):
    job = picked_job(gitlab, payload={"job_info": {"name": "build", "project_id": 1}})
    data = zip_bytes()
    body, ctype = multipart(data)
    r = upload(gitlab, job, body=body, ctype=ctype)
    assert r.status == 201 and r.body == b"201"
    assert r.headers["Content-Type"] == "application/json"
    art = gitlab.artifact(job)
    assert (art.data, art.filename, art.format, art.expire_in, art.artifact_type) == \
        (data, "artifacts.zip", "zip", "1 week", "archive")
    assert list(gitlab.artifacts(job.id)) == ["archive"]
    [attempt] = gitlab.artifact_uploads(job)
    assert attempt.status == 201 and attempt.complete and not attempt.chunked
    assert attempt.body_sha256 == hashlib.sha256(body).hexdigest()
    assert attempt.body_size == len(body) and not attempt.redirected
    assert attempt.boundary == "b0undary-0123456789abcdef"
    assert attempt.params == {"artifact_format": "zip", "artifact_type": "archive",
                              "expire_in": "1 week"}
    assert attempt.headers["Job-Token"] == job.token
    assert gitlab.artifact_dependency(job) == {
        "id": job.id, "name": "build", "token": job.token,
        "artifacts_file": {"filename": "artifacts.zip", "size": len(data)}}


def test_upload_defaults_to_a_zip_archive_and_stores_reports(gitlab):
    job = gitlab.add_job(status="running")
    assert upload(gitlab, job, query="").status == 201
    assert gitlab.artifact(job).format == "zip"
    junit = gzip.compress(b"<testsuites/>")
    body, ctype = multipart(junit, filename="junit.xml.gz")
    r = upload(gitlab, job, body=body, ctype=ctype,
               query="artifact_format=gzip&artifact_type=junit&expire_in=never")
    assert r.status == 201
    body, ctype = multipart(b'{"vulnerabilities":[]}', filename="gl-sast-report.json")
    assert upload(gitlab, job, body=body, ctype=ctype,
                  query="artifact_format=raw&artifact_type=sast").status == 201
    stored = gitlab.artifacts(job)
    assert sorted(stored) == ["archive", "junit", "sast"]
    assert (stored["junit"].data, stored["junit"].format, stored["junit"].expire_in,
            stored["junit"].filename) == (junit, "gzip", "never", "junit.xml.gz")
    assert (stored["sast"].format, stored["sast"].expire_in) == ("raw", None)
    # Only the archive is what dependencies download.
    assert gitlab.artifact_dependency(job)["artifacts_file"]["size"] == stored["archive"].size


def test_upload_refused_with_403_for_wrong_token_or_a_job_not_running(gitlab):
    job = gitlab.add_job(status="running")
    other = gitlab.add_job(status="running")
    assert upload(gitlab, job, token=other.token).status == 403
    assert upload(gitlab, job, token="glcbt-64_unknown").status == 403
    pending = gitlab.add_job()
    r = upload(gitlab, pending)
    assert r.status == 403 and r.json()["message"] == "403 Forbidden - Job is not processing " \
        "on runner" and r.headers["Job-Status"] == "pending"
    done = gitlab.add_job(status="success")
    assert upload(gitlab, done).status == 403
    canceling = gitlab.add_job(status="running").cancel()
    assert upload(gitlab, canceling).status == 201         # running or canceling (13)
    assert gitlab.artifacts(job) == {} and gitlab.artifacts(pending) == {}
    assert [a.status for a in gitlab.artifact_uploads()] == [403, 403, 403, 403, 201]


def test_upload_without_job_token_is_403_and_a_violation(double):
    job = double.add_job(status="running")
    assert upload(double, job, token=False).status == 403
    assert double.violations == [f"POST /api/v4/jobs/{job.id}/artifacts: Job-Token header "
                                 "missing"]


def test_job_token_in_private_token_or_query_is_a_violation(double):
    job = double.add_job(status="running")
    r = upload(double, job, token=False, headers={"Private-Token": job.token})
    assert r.status == 401
    r = upload(double, job, query=ARCHIVE_QUERY + "&token=" + job.token)
    assert r.status == 400
    v = double.violations
    assert any("Private-Token header sent" in x for x in v)
    assert any("`token` query parameter" in x for x in v)
    assert any("appears in the URL query string" in x for x in v)
    assert double.artifacts(job) == {}


@pytest.mark.parametrize("case", [
    "not_multipart", "no_boundary", "no_closing", "preamble", "two_files", "other_part",
    "no_filename", "part_type", "no_part_type", "no_disposition"])
def test_bad_multipart_is_400_and_a_violation(double, case):
    job = double.add_job(status="running")
    data = zip_bytes()
    body, ctype = multipart(data)
    bnd = "b0undary-0123456789abcdef"
    if case == "not_multipart":
        body, ctype = data, "application/zip"
    elif case == "no_boundary":
        ctype = "multipart/form-data"
    elif case == "no_closing":
        body = body[:-len(f"\r\n--{bnd}--\r\n")]
    elif case == "preamble":
        body = b"hello\r\n" + body
    elif case == "two_files":
        body = body.replace(f"--{bnd}--\r\n".encode(), multipart(data)[0])
    elif case == "other_part":
        extra = (f'--{bnd}\r\nContent-Disposition: form-data; name="metadata"\r\n\r\nx\r\n')
        body = extra.encode() + body
    elif case == "no_filename":
        body, ctype = multipart(data, filename=None)
    elif case == "part_type":
        body, ctype = multipart(data, ctype="application/zip")
    elif case == "no_part_type":
        body, ctype = multipart(data, ctype=None)
    elif case == "no_disposition":
        body = body.replace(b'Content-Disposition: form-data; name="file"; '
                            b'filename="artifacts.zip"\r\n', b"")
    r = upload(double, job, body=body, ctype=ctype)
    assert r.status == 400, r.body
    assert len(double.violations) == 1, double.violations
    assert double.artifacts(job) == {}


def test_parse_multipart_keeps_the_bytes():
    data = bytes(range(256)) * 3 + b"\r\n--b0undary-0123456789abcde"     # not a delimiter
    body, ctype = multipart(data)
    [part] = parse_multipart(ctype, body)
    assert (part.name, part.filename, part.content_type, part.data) == \
        ("file", "artifacts.zip", "application/octet-stream", data)


def test_413_over_max_artifact_size(gitlab):
    job = gitlab.add_job(status="running")
    gitlab.max_artifact_size = 10
    r = upload(gitlab, job, data=b"x" * 11)
    assert r.status == 413 and r.json() == {"message": "413 Request Entity Too Large"}
    assert gitlab.artifacts(job) == {}
    assert upload(gitlab, job, data=b"x" * 10).status == 201


def test_bad_format_type_and_pairs_are_400(double):
    job = double.add_job(status="running")
    r = upload(double, job, query="artifact_format=tar&artifact_type=archive")
    assert r.status == 400 and r.json() == {"error": "artifact_format does not have a valid "
                                                     "value"}
    r = upload(double, job, query="artifact_format=zip&artifact_type=bogus")
    assert r.status == 400
    r = upload(double, job, query="artifact_format=gzip&artifact_type=archive")
    assert r.status == 400 and "Invalid file format" in r.json()["message"]
    assert len(double.violations) == 3 and double.artifacts(job) == {}


def test_a_second_artifact_of_the_same_type_is_400(gitlab):
    job = gitlab.add_job(status="running")
    assert upload(gitlab, job).status == 201
    r = upload(gitlab, job)
    assert r.status == 400 and r.json() == {
        "message": "another artifact of the same type already exists"}


def test_chunked_upload(gitlab):
    job = gitlab.add_job(status="running")
    data = zip_bytes({"big.bin": bytes(range(256)) * 64})
    body, ctype = multipart(data)
    r = upload_chunked(gitlab, job, body, ctype)
    assert r.status == 201
    assert gitlab.artifact(job).data == data
    [attempt] = gitlab.artifact_uploads(job)
    assert attempt.chunked and attempt.body_sha256 == hashlib.sha256(body).hexdigest()


# --- fault injection ---------------------------------------------------------

def test_scripted_503_twice_then_success_with_identical_bodies(gitlab):
    job = gitlab.add_job(status="running")
    gitlab.script(method="POST", path=r"/jobs/\d+/artifacts$", times=2, status=503)
    body, ctype = multipart(zip_bytes())
    statuses = [upload(gitlab, job, body=body, ctype=ctype).status for _ in range(3)]
    assert statuses == [503, 503, 201]
    attempts = gitlab.artifact_uploads(job)
    assert [a.status for a in attempts] == [503, 503, 201]
    assert len({a.body_sha256 for a in attempts}) == 1
    assert len({a.boundary for a in attempts}) == 1
    assert len(gitlab.artifacts(job)) == 1


def test_scripted_413_is_recorded(gitlab):
    job = gitlab.add_job(status="running")
    gitlab.script(method="POST", path=r"/jobs/\d+/artifacts$", status=413,
                  body={"message": "413 Request Entity Too Large"})
    assert upload(gitlab, job).status == 413
    assert [a.status for a in gitlab.artifact_uploads(job)] == [413]
    assert gitlab.artifacts(job) == {}


def test_redirect_307_to_the_doubles_own_redirect_path(gitlab):
    job = gitlab.add_job(status="running")
    gitlab.artifact_redirect = True
    body, ctype = multipart(zip_bytes())
    r = upload(gitlab, job, body=body, ctype=ctype)
    assert r.status == 307 and gitlab.artifacts(job) == {}
    loc = r.headers["Location"]
    assert loc == f"{gitlab.url}/redirected/api/v4/jobs/{job.id}/artifacts?{ARCHIVE_QUERY}"
    parts = urlsplit(loc)        # a client following Location exactly
    r = call(gitlab, "POST", parts.path + "?" + parts.query, body,
             {"Job-Token": job.token, "Content-Type": ctype})
    assert r.status == 201
    first, second = gitlab.artifact_uploads(job)
    assert (first.status, first.redirected) == (307, False)
    assert (second.status, second.redirected) == (201, True)
    assert first.body_sha256 == second.body_sha256
    assert gitlab.artifact(job).expire_in == "1 week"


def test_redirect_307_to_a_second_double(gitlab_factory):
    front, other = gitlab_factory(), gitlab_factory()
    job = front.add_job(status="running")
    twin = other.add_job(id=job.id, token=job.token, status="running")
    front.artifact_redirect = other.url
    front.artifact_redirect_status = 308
    r = upload(front, job)
    assert r.status == 308
    loc = urlsplit(r.headers["Location"])
    assert (loc.port, loc.path) == (other.port, f"/api/v4/jobs/{job.id}/artifacts")
    assert upload(other, twin).status == 201
    assert other.artifact(twin) is not None and front.artifacts(job) == {}


def test_drop_mid_body_then_a_retry(gitlab):
    job = gitlab.add_job(status="running")
    rule = gitlab.script(method="POST", path=r"/jobs/\d+/artifacts$", action="drop_mid_body")
    big = bytes(range(256)) * 4096        # 1 MiB: more than the socket buffers hold
    body, ctype = multipart(big, filename="artifacts.zip")
    with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
        upload(gitlab, job, body=body, ctype=ctype)
    assert rule.used == 1
    gitlab.wait_for(lambda: gitlab.artifact_uploads(job))
    [dropped] = gitlab.artifact_uploads(job)
    assert dropped.status is None and not dropped.complete
    assert 0 < dropped.body_size < len(body)
    assert upload(gitlab, job, body=body, ctype=ctype).status == 201
    assert gitlab.artifact(job).data == big


def test_drop_mid_body_of_a_chunked_upload(gitlab):
    job = gitlab.add_job(status="running")
    gitlab.script(method="POST", path=r"/jobs/\d+/artifacts$", action="drop_mid_body")
    body, ctype = multipart(zip_bytes())
    with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
        upload_chunked(gitlab, job, body, ctype, chunk=64)
    gitlab.wait_for(lambda: gitlab.artifact_uploads(job))
    [dropped] = gitlab.artifact_uploads(job)
    assert dropped.chunked and not dropped.complete and dropped.status is None
    assert upload_chunked(gitlab, job, body, ctype).status == 201


# --- download (protocol.md 7.2) ----------------------------------------------

def test_download_with_the_dependency_token(gitlab):
    dep = gitlab.add_job(status="running")
    data = zip_bytes({"a": b"1"})
    assert upload(gitlab, dep, data=data).status == 201
    dep.status = "success"
    r = download(gitlab, dep.id, dep.token)
    assert r.status == 200 and r.body == data
    assert r.headers["Content-Type"] == "application/octet-stream"
    assert 'filename="artifacts.zip"' in r.headers["Content-Disposition"]
    assert len(gitlab.artifact_downloads(dep)) == 1


def test_download_with_a_running_jobs_token_through_dependencies(gitlab):
    dep = gitlab.add_job(payload={"job_info": {"name": "build", "project_id": 1}},
                         status="success")
    gitlab.add_artifact(dep, zip_bytes())
    entry = gitlab.artifact_dependency(dep)
    assert entry["artifacts_file"] == {"filename": "artifacts.zip",
                                       "size": gitlab.artifact(dep).size}
    later = picked_job(gitlab, payload={"dependencies": [entry]})
    [sent] = json.loads(gitlab.requests_for("POST", "jobs/request")[-1].response_body)[
        "dependencies"]
    # Rails exposes the running job's token for the download (bind_identity).
    assert sent == dict(entry, token=later.token)
    r = download(gitlab, dep.id, later.token, "direct_download=false")
    assert r.status == 200 and r.body == gitlab.artifact(dep).data


def test_download_refusals(double):
    dep = double.add_job(status="success")
    double.add_artifact(dep, zip_bytes())
    stranger = double.add_job(payload={"job_info": {"name": "x", "project_id": 2}},
                              status="running")
    finished = double.add_job(status="success")
    bare = double.add_job(status="success")
    assert download(double, dep.id, "glcbt-64_unknown").status == 401
    assert download(double, dep.id, finished.token).status == 401
    assert download(double, dep.id, stranger.token).status == 403
    assert download(double, 999999, dep.token).status == 401
    assert download(double, bare.id, bare.token).status == 404
    assert double.violations == []
    r = download(double, dep.id, None)
    assert r.status == 401
    assert double.violations == [f"GET /api/v4/jobs/{dep.id}/artifacts: Job-Token header "
                                 "missing"]


def test_direct_download_redirects_to_storage(gitlab):
    dep = gitlab.add_job(status="success")
    data = zip_bytes()
    gitlab.add_artifact(dep, data)
    r = download(gitlab, dep.id, dep.token, "direct_download=true")
    assert r.status == 302
    loc = r.headers["Location"]
    assert loc.startswith(gitlab.url + "/storage/") and "X-Amz-Signature=" in loc
    got = get_url(loc)                       # no token, no X-Request-Id needed
    assert got.status == 200 and got.body == data
    part = get_url(loc, {"Range": "bytes=0-0"})
    assert part.status == 206 and part.body == data[:1]
    assert part.headers["Content-Range"] == f"bytes 0-0/{len(data)}"
    assert len(gitlab.storage_requests()) == 2
    gitlab.direct_download_status = 307
    assert download(gitlab, dep.id, dep.token, "direct_download=true").status == 307
    gitlab.artifacts_object_storage = False
    r = download(gitlab, dep.id, dep.token, "direct_download=true")
    assert r.status == 200 and r.body == data


def test_storage_refuses_a_bad_signature(gitlab):
    dep = gitlab.add_job(status="success")
    gitlab.add_artifact(dep, zip_bytes())
    loc = download(gitlab, dep.id, dep.token, "direct_download=true").headers["Location"]
    r = get_url(loc.rsplit("=", 1)[0] + "=" + "0" * 64)
    assert r.status == 403 and b"<Code>SignatureDoesNotMatch</Code>" in r.body
    r = get_url(loc.split("?")[0])
    assert r.status == 403


@pytest.mark.parametrize("header", ["Job-Token", "Private-Token", "Authorization"])
def test_storage_rejects_any_token_header(double, header):
    dep = double.add_job(status="success")
    double.add_artifact(dep, zip_bytes())
    loc = download(double, dep.id, dep.token, "direct_download=true").headers["Location"]
    r = get_url(loc, {header: dep.token if header != "Authorization" else "Bearer x"})
    assert r.status == 400 and b"InvalidArgument" in r.body
    assert len(double.violations) == 1
    assert f"{header} header sent to object storage" in double.violations[0]


def test_storage_fails_once_then_serves(gitlab):
    dep = gitlab.add_job(status="success")
    data = zip_bytes()
    gitlab.add_artifact(dep, data)
    gitlab.fail_storage(status=500, times=1)
    loc = download(gitlab, dep.id, dep.token, "direct_download=true").headers["Location"]
    r = get_url(loc)
    assert r.status == 500 and b"<Code>InternalError</Code>" in r.body
    r = get_url(loc)
    assert r.status == 200 and r.body == data
    assert [q.response_status for q in gitlab.storage_requests()] == [500, 200]
