"""Job artifacts on the double: upload, download, and the object storage a
direct download is redirected to (protocol.md 1.3, 7.1, 7.2, 13).

Why it exists: the runner's artifact code must be checked against what
Workhorse + Rails really do (multipart upload of one "file" part, 201 /
403 / 413 / 503 / 307 answers, downloads by dependency token, a 302 to a
presigned object-storage URL that must be fetched *without* the job
token).  GitLabDouble inherits ArtifactsMixin like JobsMixin.

Routes:

- POST /api/v4/jobs/:id/artifacts: Job-Token header of the (running or
  canceling) job, else 403 (a missing header is also a violation); query
  artifact_format (raw|zip|gzip, default zip), artifact_type (default
  archive), expire_in; a `token` query parameter is a violation (400:
  the runner must use Job-Token), so is any other parameter (recorded
  only).  Body: multipart/form-data with exactly one part, name="file",
  a filename and Content-Type application/octet-stream; anything else is
  a violation and 400.  Then, in Rails' order: 413 over
  max_artifact_size (the file's size), 400 for a type/format pair Rails'
  Ci::JobArtifact refuses, 400 for a second artifact of the same type,
  else stored and 201 with body "201" (Rails: `status :created; body "201"`).
- POST /redirected/api/v4/jobs/:id/artifacts: the same upload, served
  when artifact_redirect sent the client there (see below).
- GET /api/v4/jobs/:id/artifacts: Job-Token of job :id itself (any
  status), or of a running/canceling job of the same project (Rails with
  ci_expose_running_job_token_for_artifacts; bind_identity puts the
  running job's token into `dependencies`).  Missing or unknown token
  401 (a missing header is also a violation), another project's job
  403, unknown job 403, no archive 404.  direct_download=true with
  artifacts_object_storage on -> direct_download_status (302, or 307)
  to a presigned URL on the double's own /storage/; otherwise 200 and
  the bytes (application/octet-stream, Content-Disposition attachment).
- GET /storage/<key>/<filename>?X-Amz-...&X-Amz-Signature=<sig>: not
  GitLab, so none of the API's header rules apply; any Job-Token,
  Private-Token, Runner-Token or Authorization header is a violation and
  answered 400 (the runner must not hand its token to storage).  An
  unknown signature 403, unknown key 404 (S3 XML errors); else 200 (206
  for a `Range: bytes=A-B`).

Fault injection: the double's script() rules match these paths like any
other (a 503 twice: script("POST", r"/jobs/\\d+/artifacts$", times=2,
status=503); a drop while the body arrives: action="drop_mid_body");
fail_storage() scripts S3-style errors on /storage/; artifact_redirect
(True: the double's own /redirected/ path; a base URL string: that
server, e.g. a second double that has the same job) makes every upload
on the normal path answer artifact_redirect_status (307) with Location
= target + the same path and query.

Records: every upload attempt, injected, dropped and redirected ones
included, is derived from the double's request records
(artifact_uploads()), with the sha256 of the entity body (de-chunked),
so a test can assert that retries sent byte-identical bodies.
"""
import hashlib
import re
import secrets
from dataclasses import dataclass, field
from typing import Optional
from urllib.parse import parse_qsl, quote, unquote, unquote_plus

from .double import (API_PREFIX, AUTH_JOB_ARTIFACTS, AUTH_STORAGE, Headers, Request, Response,
                     endpoint, grape_error, json_response, message)

REDIRECT_PREFIX = "/redirected"
STORAGE_PREFIX = "/storage"
UPLOAD_PATH_RE = re.compile(r"^(?P<redirected>" + re.escape(REDIRECT_PREFIX) + r")?"
                            + re.escape(API_PREFIX) + r"/jobs/(?P<id>\d+)/artifacts$")
DOWNLOAD_PATH_RE = re.compile("^" + re.escape(API_PREFIX) + r"/jobs/(?P<id>\d+)/artifacts$")
ARTIFACT_FORMATS = ("raw", "zip", "gzip")
UPLOAD_PARAMS = ("artifact_format", "artifact_type", "expire_in")
STORAGE_FORBIDDEN_HEADERS = ("Job-Token", "Private-Token", "Runner-Token", "Authorization")
BOUNDARY_RE = re.compile(r"^[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]$")

# Rails' Ci::JobArtifact::TYPE_AND_FORMAT_PAIRS: the only format each type
# may be stored in (a mismatch fails validation: 400).
TYPE_AND_FORMAT_PAIRS = {
    "archive": "zip", "metadata": "gzip", "trace": "raw", "junit": "gzip",
    "metrics": "gzip", "metrics_referee": "gzip", "network_referee": "gzip",
    "dotenv": "gzip", "cobertura": "gzip", "jacoco": "gzip",
    "cluster_applications": "gzip", "lsif": "zip", "cyclonedx": "gzip",
    "annotations": "gzip", "repository_xray": "gzip",
    "sast": "raw", "secret_detection": "raw", "dependency_scanning": "raw",
    "container_scanning": "raw", "cluster_image_scanning": "raw", "dast": "raw",
    "coverage_fuzzing": "raw", "api_fuzzing": "raw", "codequality": "raw",
    "license_scanning": "raw", "performance": "raw", "browser_performance": "raw",
    "load_performance": "raw", "terraform": "raw", "requirements": "raw",
    "requirements_v2": "raw", "accessibility": "raw",
}


@dataclass
class Artifact:
    """One stored artifact of a job (Rails: a Ci::JobArtifact row + its file)."""
    job_id: int
    artifact_type: str
    data: bytes
    filename: str
    format: str
    expire_in: Optional[str] = None
    key: str = field(default_factory=lambda: secrets.token_hex(16))   # object storage key

    @property
    def size(self):
        return len(self.data)

    @property
    def sha256(self):
        return hashlib.sha256(self.data).hexdigest()


@dataclass
class ArtifactUpload:
    """One upload attempt as it arrived (whatever the answer, or none)."""
    job_id: int
    query: list                  # (name, value) pairs, in order
    headers: Headers
    status: Optional[int]        # None: the connection was dropped, no answer
    body_sha256: str             # of the entity body (de-chunked), what arrived of it
    body_size: int
    chunked: bool
    complete: bool               # False: the client went away mid-body (or the rule cut it)
    redirected: bool             # arrived on the /redirected/ path
    boundary: Optional[str]      # the multipart boundary of Content-Type
    request: Request

    @property
    def params(self):
        return dict(self.query)


class MultipartError(ValueError):
    pass


@dataclass
class Part:
    headers: Headers
    name: Optional[str]
    filename: Optional[str]
    content_type: Optional[str]
    data: bytes


def _header_params(value):
    """'type; a=1; b="x y"' -> ('type', {'a': '1', 'b': 'x y'}), strictly."""
    head, _, rest = value.partition(";")
    params = {}
    for m in re.finditer(r'\s*([A-Za-z0-9_*-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*?)\s*(?:;|$)',
                         rest):
        k, v = m.group(1).lower(), m.group(2)
        if v.startswith('"'):
            v = re.sub(r"\\(.)", r"\1", v[1:-1])
        if k in params:
            raise MultipartError(f"parameter {k!r} given twice in {value!r}")
        params[k] = v
    return head.strip().lower(), params


def multipart_boundary(content_type):
    """The boundary of a multipart/form-data Content-Type, or MultipartError."""
    if content_type is None:
        raise MultipartError("no Content-Type (multipart/form-data expected)")
    mtype, params = _header_params(content_type)
    if mtype != "multipart/form-data":
        raise MultipartError(f"Content-Type {content_type!r} is not multipart/form-data")
    boundary = params.get("boundary")
    if not boundary:
        raise MultipartError("multipart/form-data without a boundary")
    if not BOUNDARY_RE.match(boundary):
        raise MultipartError(f"boundary {boundary!r} is not a valid RFC 2046 boundary")
    return boundary


def parse_multipart(content_type, body):
    """The parts of a multipart/form-data body (RFC 7578), strictly.

    No preamble, CRLF line ends, every part with headers and a blank line,
    a closing delimiter; an epilogue of CRLF only.
    """
    boundary = multipart_boundary(content_type).encode()
    delim = b"--" + boundary
    if not body.startswith(delim + b"\r\n"):
        raise MultipartError("the body does not start with the boundary delimiter line")
    close = b"\r\n" + delim + b"--"
    end = body.rfind(close)
    if end < 0:
        raise MultipartError("no closing boundary delimiter (body cut short?)")
    if body[end + len(close):] not in (b"", b"\r\n"):
        raise MultipartError("data after the closing boundary delimiter")
    inner = body[len(delim) + 2:end]
    parts = []
    for chunk in inner.split(b"\r\n" + delim + b"\r\n"):
        if chunk.startswith(b"\r\n"):
            head, data = b"", chunk[2:]            # a part without headers
        else:
            head, sep, data = chunk.partition(b"\r\n\r\n")
            if not sep:
                raise MultipartError("a part without the blank line after its headers")
        pairs = []
        for line in head.split(b"\r\n") if head else []:
            name, colon, value = line.partition(b":")
            if not colon or not name.strip() or name != name.strip():
                raise MultipartError(f"bad part header line {line[:60]!r}")
            pairs.append((name.decode("latin-1"), value.strip().decode("utf-8", "replace")))
        headers = Headers(pairs)
        for h in ("Content-Disposition", "Content-Type"):
            if len(headers.get_all(h)) > 1:
                raise MultipartError(f"part header {h} given twice")
        disp = headers.get("Content-Disposition")
        if disp is None:
            raise MultipartError("a part without Content-Disposition")
        dtype, dparams = _header_params(disp)
        if dtype != "form-data":
            raise MultipartError(f"Content-Disposition {disp!r} is not form-data")
        ctype = headers.get("Content-Type")
        parts.append(Part(headers, dparams.get("name"), dparams.get("filename"),
                          ctype, data))
    return parts


def _s3_error(status, code, text):
    body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code>'
            '<Message>%s</Message></Error>' % (code, text)).encode()
    return Response(status, body, [("Content-Type", "application/xml")])


def _query_pairs(call, allowed):
    """The query's pairs; violations for a token, unknown or repeated names.

    Returns (pairs, rejection or None).
    """
    pairs = parse_qsl(call.request.query, keep_blank_values=True)
    names = [k for k, _ in pairs]
    rejection = None
    for name in sorted(set(names)):
        if name == "token":
            text = "job token sent as the `token` query parameter (use the Job-Token header)"
            call.violate(text)
            rejection = message(400, "double: " + text)
        elif name not in allowed:
            call.violate(f"unknown query parameter {name!r}")
        if names.count(name) > 1:
            call.violate(f"query parameter {name!r} sent {names.count(name)} times")
    return pairs, rejection


class ArtifactsMixin:
    """Artifact state and endpoints; needs GitLabDouble's lock, records and JobsMixin."""

    def _artifacts_init(self):
        self.max_artifact_size = None          # bytes of the file part; over it: 413
        self.artifact_redirect = False         # True (own /redirected/ path) or a base URL
        self.artifact_redirect_status = 307
        self.artifacts_object_storage = True   # direct_download=true redirects to /storage/
        self.direct_download_status = 302      # or 307
        self._artifacts = {}                   # job id -> {artifact_type: Artifact}
        self._presigned = {}                   # signature -> object key
        self._objects = {}                     # object key -> Artifact

    # -- test-side helpers -----------------------------------------------------

    def artifacts(self, job_id):
        """job id (or Job) -> {artifact_type: Artifact} of what was stored."""
        job_id = getattr(job_id, "id", job_id)
        with self._lock:
            return dict(self._artifacts.get(job_id, {}))

    def artifact(self, job_id, artifact_type="archive"):
        return self.artifacts(job_id).get(artifact_type)

    def add_artifact(self, job, data, filename=None, artifact_type="archive",
                     artifact_format=None, expire_in=None):
        """Store an artifact GitLab-side, as if the job had uploaded it; returns it."""
        job_id = getattr(job, "id", job)
        fmt = artifact_format or TYPE_AND_FORMAT_PAIRS.get(artifact_type, "raw")
        if filename is None:
            filename = {"zip": "artifacts.zip", "gzip": f"{artifact_type}.gz"}.get(
                fmt, artifact_type)
        art = Artifact(job_id, artifact_type, bytes(data), filename, fmt, expire_in)
        with self._lock:
            if job_id not in self.jobs:
                raise KeyError(f"no job {job_id}")
            self._store(art)
        return art

    def artifact_dependency(self, job):
        """The `dependencies` entry of a later job's payload for this job (4.5).

        artifacts_file only when the job has an archive (Rails exposes it
        only then, and the runner downloads only entries that have it).
        The token is the job's own; add_job's bind_identity replaces it
        with the later job's token, as GitLab does with
        ci_expose_running_job_token_for_artifacts (both are accepted).
        """
        job_id = getattr(job, "id", job)
        with self._lock:
            j = self.jobs[job_id]
            dep = {"id": j.id, "name": j.name, "token": j.token}
            art = self._artifacts.get(j.id, {}).get("archive")
            if art is not None:
                dep["artifacts_file"] = {"filename": art.filename, "size": art.size}
            return dep

    def artifact_uploads(self, job_id=None):
        """Every upload attempt (list of ArtifactUpload), of one job or all, in order."""
        job_id = getattr(job_id, "id", job_id)
        out = []
        for req in self.requests_for("POST", UPLOAD_PATH_RE.pattern):
            m = UPLOAD_PATH_RE.match(req.path)
            if job_id is not None and int(m.group("id")) != job_id:
                continue
            try:
                boundary = multipart_boundary(req.headers.get("Content-Type"))
            except MultipartError:
                boundary = None
            out.append(ArtifactUpload(
                job_id=int(m.group("id")), query=parse_qsl(req.query, keep_blank_values=True),
                headers=req.headers, status=req.response_status,
                body_sha256=hashlib.sha256(req.body).hexdigest(), body_size=len(req.body),
                chunked=req.chunked, complete=req.complete,
                redirected=bool(m.group("redirected")), boundary=boundary, request=req))
        return out

    def artifact_downloads(self, job_id=None):
        """The GET /jobs/:id/artifacts requests (Request records), of one job or all."""
        job_id = getattr(job_id, "id", job_id)
        return [r for r in self.requests_for("GET", DOWNLOAD_PATH_RE.pattern)
                if job_id is None or int(DOWNLOAD_PATH_RE.match(r.path).group("id")) == job_id]

    def storage_requests(self):
        """Every request to the double's object storage (/storage/...)."""
        return self.requests_for("*", "^" + re.escape(STORAGE_PREFIX) + "/")

    def fail_storage(self, status=500, times=1, code="InternalError",
                     text="We encountered an internal error. Please try again."):
        """Object storage answers an S3-style XML error to the next `times` GETs."""
        body = _s3_error(status, code, text).body
        return self.script(method="GET", path="^" + re.escape(STORAGE_PREFIX) + "/",
                           times=times, status=status, body=body,
                           headers={"Content-Type": "application/xml"})

    # -- endpoint logic --------------------------------------------------------

    def _store(self, art):
        self._artifacts.setdefault(art.job_id, {})[art.artifact_type] = art
        self._objects[art.key] = art

    def _check_storage(self, call):
        """Object storage requests: no token of any kind, none in the URL either."""
        req = call.request
        for name in STORAGE_FORBIDDEN_HEADERS:
            if req.headers.get_all(name):
                text = f"{name} header sent to object storage (the token must not leave GitLab)"
                call.violate(text, _s3_error(
                    400, "InvalidArgument", "Only one auth mechanism allowed; double: " + text))
        with self._lock:
            tokens = self._secrets()
        path, query = unquote(req.path), unquote_plus(req.query)
        for tok, what in sorted(tokens.items()):
            if tok in path or tok in query:
                call.violate(f"{what} appears in an object storage URL")
        if req.body:
            call.violate(f"a body ({len(req.body)} bytes) on an object storage GET")

    def _redirect_upload(self, call):
        req = call.request
        base = self.url + REDIRECT_PREFIX if self.artifact_redirect is True \
            else str(self.artifact_redirect).rstrip("/")
        location = base + req.path + ("?" + req.query if req.query else "")
        return json_response(self.artifact_redirect_status,
                             {"message": f"{self.artifact_redirect_status} Redirect"},
                             [("Location", location)])

    @endpoint("POST", r"/jobs/(?P<id>\d+)/artifacts", auth=AUTH_JOB_ARTIFACTS,
              body="multipart", required=())
    def upload_artifacts(self, call):
        """POST /jobs/:id/artifacts (7.1), or the 307 of artifact_redirect."""
        if self.artifact_redirect:
            return self._redirect_upload(call)
        return self._upload(call)

    @endpoint("POST", r"/jobs/(?P<id>\d+)/artifacts", auth=AUTH_JOB_ARTIFACTS,
              body="multipart", required=(), prefix=REDIRECT_PREFIX + API_PREFIX)
    def upload_artifacts_redirected(self, call):
        """Where artifact_redirect=True sends uploads: the same upload, never redirected."""
        return self._upload(call)

    def _upload(self, call):
        req = call.request
        pairs, rejection = _query_pairs(call, UPLOAD_PARAMS)
        if rejection is not None:
            return rejection
        # Workhorse's authorize call: authenticate_job! (a missing token is a 403 too).
        job, refusal = self._job_for(call, req.headers.get("Job-Token"))
        if refusal is not None:
            return refusal
        try:
            parts = parse_multipart(req.headers.get("Content-Type"), req.body)
        except MultipartError as e:
            call.violate(f"bad multipart body: {e}")
            return message(400, f"400 Bad Request - double: {e}")
        files = [p for p in parts if p.name == "file"]
        others = [p.name for p in parts if p.name != "file"]
        if others:
            call.violate(f"multipart parts other than \"file\": {others}")
            return message(400, f"400 Bad Request - double: unexpected parts {others}")
        if len(files) != 1:
            call.violate(f"{len(files)} parts named \"file\" (exactly one expected)")
            return grape_error("file is missing" if not files else "file is invalid")
        part = files[0]
        if not part.filename:
            call.violate("the \"file\" part has no filename")
            return grape_error("file is invalid")
        ctype = (part.content_type or "").split(";", 1)[0].strip().lower()
        if ctype != "application/octet-stream":
            call.violate(f"the \"file\" part's Content-Type is {part.content_type!r} "
                         "(application/octet-stream expected)")
            return message(400, "400 Bad Request - double: file part Content-Type")
        if self.max_artifact_size is not None and len(part.data) > self.max_artifact_size:
            return message(413, "413 Request Entity Too Large")
        params = dict(pairs)
        fmt = params.get("artifact_format") or "zip"
        atype = params.get("artifact_type") or "archive"
        errors = []
        if fmt not in ARTIFACT_FORMATS:
            errors.append("artifact_format does not have a valid value")
        if atype not in TYPE_AND_FORMAT_PAIRS:
            errors.append("artifact_type does not have a valid value")
        if errors:
            call.violate("rejected parameters: " + ", ".join(errors))
            return grape_error(", ".join(errors))
        if TYPE_AND_FORMAT_PAIRS[atype] != fmt:
            call.violate(f"artifact_type {atype} with artifact_format {fmt} "
                         f"(Rails stores {atype} only as {TYPE_AND_FORMAT_PAIRS[atype]})")
            return message(400, "Validation failed: Invalid file format with specified "
                                "file type")
        if atype in self._artifacts.get(job.id, {}):
            return message(400, "another artifact of the same type already exists")
        self._store(Artifact(job.id, atype, part.data, part.filename, fmt,
                             params.get("expire_in") or None))
        return Response(201, b"201", [("Content-Type", "application/json")])

    def _reader_refusal(self, call, job):
        """authenticate_job_via_dependent_job!: None when the token may read job's artifacts."""
        token = call.request.headers.get("Job-Token")
        reader = None
        if isinstance(token, str):
            reader = next((j for j in self.jobs.values() if j.token == token), None)
        if reader is None:
            return message(401, "401 Unauthorized")
        if reader is job:
            return None
        if reader.status not in ("running", "canceling"):
            return message(401, "401 Unauthorized")     # a job token lives while it runs
        if job is None:
            return message(403, "403 Forbidden")
        project = (job.payload.get("job_info") or {}).get("project_id")
        if (reader.payload.get("job_info") or {}).get("project_id") != project:
            return message(403, "403 Forbidden")
        return None

    @endpoint("GET", r"/jobs/(?P<id>\d+)/artifacts", auth=AUTH_JOB_ARTIFACTS, body=None,
              required=())
    def download_artifacts(self, call):
        """GET /jobs/:id/artifacts (7.2): the archive, or a 302 to object storage."""
        pairs, rejection = _query_pairs(call, ("direct_download",))
        if rejection is not None:
            return rejection
        direct = dict(pairs).get("direct_download", "false")
        if direct not in ("true", "false", "1", "0"):
            call.violate(f"direct_download={direct!r} is not a boolean")
            return grape_error("direct_download is invalid")
        job = self.jobs.get(int(call.args["id"]))
        refusal = self._reader_refusal(call, job)
        if refusal is not None:
            return refusal
        if job is None:
            return message(403, "403 Forbidden")
        art = self._artifacts.get(job.id, {}).get("archive")
        if art is None:
            return message(404, "404 Not Found")
        if direct in ("true", "1") and self.artifacts_object_storage:
            sig = secrets.token_hex(32)
            self._presigned[sig] = art.key
            location = (f"{self.url}{STORAGE_PREFIX}/{art.key}/{quote(art.filename)}"
                        f"?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=600"
                        f"&X-Amz-SignedHeaders=host&X-Amz-Signature={sig}")
            return Response(self.direct_download_status, b"", [("Location", location)])
        return Response(200, art.data, [
            ("Content-Type", "application/octet-stream"),
            ("Content-Disposition", f"attachment; filename=\"{art.filename}\"; "
                                    f"filename*=UTF-8''{quote(art.filename)}")])

    @endpoint("GET", r"/(?P<key>[0-9a-f]{32})/(?P<name>[^/]+)", auth=AUTH_STORAGE, body=None,
              required=(), prefix=STORAGE_PREFIX)
    def storage_get(self, call):
        """The object storage a direct download points at (S3-like, presigned URLs)."""
        sig = dict(parse_qsl(call.request.query)).get("X-Amz-Signature")
        if sig is None or self._presigned.get(sig) != call.args["key"]:
            return _s3_error(403, "SignatureDoesNotMatch",
                             "The request signature we calculated does not match the "
                             "signature you provided.")
        art = self._objects.get(call.args["key"])
        if art is None:
            return _s3_error(404, "NoSuchKey", "The specified key does not exist.")
        headers = [("Content-Type", "application/octet-stream"),
                   ("ETag", '"%s"' % hashlib.md5(art.data).hexdigest()),
                   ("Accept-Ranges", "bytes")]
        rng = call.request.headers.get("Range")
        m = re.match(r"^bytes=(\d+)-(\d*)$", rng.strip()) if rng else None
        if rng is not None and m is None:
            call.violate(f"Range {rng!r} is not bytes=A-B")
        if m:
            start = int(m.group(1))
            end = min(int(m.group(2)) if m.group(2) else art.size - 1, art.size - 1)
            if start >= art.size or end < start:
                return _s3_error(416, "InvalidRange", "The requested range is not satisfiable")
            return Response(206, art.data[start:end + 1],
                            headers + [("Content-Range", f"bytes {start}-{end}/{art.size}")])
        return Response(200, art.data, headers)
