"""Jobs on the double: PUT /jobs/:id and PATCH /jobs/:id/trace, handing out
queued jobs to POST /jobs/request, and what GitLab does to a job on its own
side (cancel, abort, drop) (protocol.md 4.3, 5, 6, 13).

Kept apart from double.py so the runner endpoints stay readable; the
endpoints here are collected the same way (GitLabDouble inherits JobsMixin).
Job-scoped calls carry the job token: in the JSON body and the Job-Token
header for PUT (they must agree), in Job-Token alone for PATCH.

What the double checks on a job (the daemon's bugs it catches): a final
PUT whose output.checksum / output.bytesize do not describe the log the
double received through PATCH is recorded in job.checksum_mismatch and,
for jobs the client got from POST /jobs/request (or verify_checksum=True),
as a violation.  What it can be told to do, per job: update_interval
(X-GitLab-Trace-Update-Interval), accept_after (202s before a final PUT is
accepted), trace_validation_fails (412s), trace_size_limit (bytes; a PATCH
beyond drops the job with trace_size_exceeded and answers 403).
"""
import copy
import re
import threading
import zlib
from dataclasses import dataclass, field
from typing import Optional

from .double import (AUTH_JOB, AUTH_JOB_HEADER, FORBIDDEN, HASH, INT, STR, Response,
                     endpoint, json_response, message, one_of)
from .payloads import (DEFAULT_SERVER_URL, FAILURE_REASONS, bind_identity, job_payload,
                       new_job_token)

CONTENT_RANGE_RE = re.compile(r"^(\d+)-(\d+)$")
ACTIVE = ("running", "canceling")
FINAL_STATUSES = ("success", "failed", "canceled")
JOB_OPTIONS = ("update_interval", "accept_after", "trace_validation_fails",
               "trace_size_limit", "verify_checksum")


def crc32_checksum(data):
    """The runner's output.checksum of a log (protocol.md 6.4)."""
    return "crc32:%08x" % (zlib.crc32(bytes(data)) & 0xFFFFFFFF)


@dataclass
class Job:
    """A job as GitLab sees it: its status, the log received, every update.

    Options (set at add_job or any time between requests): update_interval,
    accept_after, trace_validation_fails (True or a count), trace_size_limit
    (bytes, None = none), verify_checksum (None: only for jobs handed out
    by POST /jobs/request).  The state helpers take the double's lock.
    """
    id: int
    token: str
    payload: dict
    runner_id: Optional[int] = None     # None: any runner may take it
    status: str = "pending"
    trace: bytearray = field(default_factory=bytearray)
    updates: list = field(default_factory=list)     # JSON bodies of every PUT accepted
    final: Optional[dict] = None                    # the PUT that ended it
    update_interval: int = 3                        # X-GitLab-Trace-Update-Interval
    accept_after: int = 0
    trace_validation_fails: int = 0
    trace_size_limit: Optional[int] = None
    verify_checksum: Optional[bool] = None
    failure_reason: Optional[str] = None            # as Rails stores it
    exit_code: Optional[int] = None
    handed_out: bool = False                        # a job request got it
    final_puts: int = 0                             # final PUTs checked against the log
    checksum_mismatch: Optional[str] = None         # the first mismatch, as text
    trace_resets: int = 0                           # logs discarded by a 412
    _lock: object = field(default_factory=threading.RLock, repr=False, compare=False)

    @property
    def log(self):
        return bytes(self.trace)

    @property
    def log_text(self):
        """The log as text (invalid UTF-8 replaced): what the job page would show."""
        return bytes(self.trace).decode("utf-8", errors="replace")

    @property
    def checksum(self):
        return crc32_checksum(self.trace)

    @property
    def name(self):
        return (self.payload.get("job_info") or {}).get("name")

    @property
    def checksum_ok(self):
        """None until a final PUT was checked; then whether every one matched."""
        return None if self.final_puts == 0 else self.checksum_mismatch is None

    # -- what GitLab does on its own side ------------------------------------

    def cancel(self):
        """Cancel from the UI/API: running -> canceling (graceful, 4.7, 9.6).

        The runner then sees Job-Status: canceling on its next PATCH/PUT and
        should run after_script and report; a final success/failed PUT makes
        the job canceled.  A pending job goes straight to canceled.
        """
        with self._lock:
            if self.status == "running":
                self.status = "canceling"
            elif self.status not in FINAL_STATUSES + ("canceling",):
                self.status = "canceled"
        return self

    def abort(self):
        """Force-cancel: canceled at once; PATCH/PUT get 403 + Job-Status: canceled."""
        with self._lock:
            if self.status not in ("success", "failed"):
                self.status = "canceled"
        return self

    def fail_server_side(self, reason):
        """GitLab drops the job itself (stuck, timeout, ...): 403 + Job-Status: failed."""
        if reason not in FAILURE_REASONS:
            raise ValueError(f"{reason!r} is not a Rails failure reason")
        with self._lock:
            self.status = "failed"
            self.failure_reason = reason
        return self

    def report(self):
        """What the pipeline summary says about this job (JSON-able)."""
        with self._lock:
            return {"id": self.id, "name": self.name, "status": self.status,
                    "failure_reason": self.failure_reason, "exit_code": self.exit_code,
                    "log": self.log_text, "bytesize": len(self.trace),
                    "checksum": self.checksum, "checksum_ok": self.checksum_ok,
                    "checksum_mismatch": self.checksum_mismatch}


def _job_headers(job):
    return [("Job-Status", job.status),
            ("X-GitLab-Trace-Update-Interval", str(job.update_interval))]


def _put_answer(job, status):
    """PUT /jobs/:id answers: the status number as the body, always Job-Status (5.2)."""
    return Response(status, str(status).encode(),
                    [("Content-Type", "text/plain")] + _job_headers(job))


class JobsMixin:
    """Job state and endpoints; needs GitLabDouble's lock and records."""

    def _jobs_init(self):
        self.jobs = {}
        self._next_job_id = 5000

    # -- test-side helpers -----------------------------------------------------

    def add_job(self, payload=None, id=None, token=None, status="pending", runner=None,
                **options):
        """Queue a job (pending: the next job request may get it); returns the Job.

        payload is merged (top level) over job_payload()'s defaults, then the
        job's id and token are bound everywhere Rails puts them.  runner: a
        Runner or runner id that alone may take it (None: any).  options: see
        Job (update_interval, accept_after, ...).  A pending job ticks the
        queue of the runners that may take it, releasing their long polls.
        """
        unknown = set(options) - set(JOB_OPTIONS)
        if unknown:
            raise TypeError(f"add_job: unknown options {sorted(unknown)}")
        runner_id = getattr(runner, "id", runner)
        with self._lock:
            if id is None:
                id = self._next_job_id
            if id in self.jobs:
                raise ValueError(f"job id {id} exists")
            self._next_job_id = max(self._next_job_id, id + 1)
            token = token or new_job_token()
            body = job_payload(server_url=self._server_url())
            body.update(copy.deepcopy(payload or {}))
            bind_identity(body, id, token)
            job = Job(id=id, token=token, payload=body, status=status,
                      runner_id=runner_id, _lock=self._lock, **options)
            self.jobs[id] = job
            if status == "pending":
                for r in list(self.runners.values()):
                    if runner_id in (None, r.id):
                        self.tick_queue(r)
            return job

    def add_job_spec(self, spec):
        """Queue a job from a data spec (one entry of a --pipeline file).

        spec: job_payload() arguments plus "id", "runner" (id) and the Job
        options; server_url defaults to the double's own URL.
        """
        spec = dict(spec)
        kwargs = {k: spec.pop(k) for k in JOB_OPTIONS if k in spec}
        id, runner = spec.pop("id", None), spec.pop("runner", None)
        spec.setdefault("server_url", self._server_url())
        return self.add_job(job_payload(**spec), id=id, runner=runner, **kwargs)

    def _server_url(self):
        return self.url if self.port else DEFAULT_SERVER_URL

    def job(self, id):
        with self._lock:
            return self.jobs.get(id)

    def wait_for_job(self, job, statuses=FINAL_STATUSES, timeout=10.0):
        """Wait until the job (a Job or an id) has one of statuses; returns the Job."""
        job = job if isinstance(job, Job) else self.job(job)
        wanted = (statuses,) if isinstance(statuses, str) else tuple(statuses)
        try:
            self.wait_for(lambda: job.status in wanted, timeout=timeout)
        except TimeoutError as e:
            raise TimeoutError(f"job {job.id} is {job.status!r}, not one of {wanted} after "
                               f"{timeout} s; {e}") from None
        return job

    def jobs_final(self, ids=None):
        """True when every job (or those ids) has reached a final status."""
        with self._lock:
            jobs = [self.jobs[i] for i in ids] if ids is not None else list(self.jobs.values())
            return all(j.status in FINAL_STATUSES for j in jobs)

    # -- endpoint logic --------------------------------------------------------

    def _pick_job(self, runner, call):
        for job in self.jobs.values():
            if job.status == "pending" and job.runner_id in (None, runner.id):
                job.status = "running"
                job.runner_id = runner.id
                job.handed_out = True
                return json_response(201, job.payload)
        return None

    def _job_for(self, call, token):
        """authenticate_job!: the job if the token is its own, else a 403 Response."""
        job = self.jobs.get(int(call.args["id"]))
        if job is None or not isinstance(token, str) or token != job.token:
            return None, message(403, FORBIDDEN)
        if job.status not in ACTIVE:
            return None, Response(403, b'{"message":"403 Forbidden - Job is not processing '
                                  b'on runner"}', [("Content-Type", "application/json")]
                                  + _job_headers(job))
        return job, None

    def _check_final_output(self, call, job):
        """Does the final PUT describe the log the double holds? (5.3, 6.4)"""
        p = call.params
        out = p.get("output") if isinstance(p.get("output"), dict) else {}
        checksum, size = out.get("checksum"), out.get("bytesize", 0)
        problems = []
        if checksum is None:
            problems.append("no output.checksum")
        elif checksum != job.checksum:
            problems.append(f"output.checksum {checksum}, the log held has {job.checksum}")
        if size != len(job.trace):
            problems.append(f"output.bytesize {size}, the log held is {len(job.trace)} bytes")
        if p.get("checksum") is not None and p["checksum"] != checksum:
            problems.append(f"checksum {p['checksum']} differs from output.checksum")
        job.final_puts += 1
        if not problems:
            return
        text = (f"final update of job {job.id} does not describe the log GitLab holds: "
                + "; ".join(problems))
        if job.checksum_mismatch is None:
            job.checksum_mismatch = text
        verify = job.verify_checksum if job.verify_checksum is not None else job.handed_out
        if verify:
            call.violate(text)

    def _finish_job(self, job, p):
        """Apply an accepted final state (Rails: success!, drop, or canceled).

        A canceling job ends canceled whatever it reports (its reason stays
        in job.final only); an unknown reason is stored as unknown_failure.
        """
        job.final = dict(p)
        job.exit_code = p.get("exit_code")
        if job.status == "canceling":
            job.status = "canceled"
            return
        if p["state"] == "failed":
            reason = p.get("failure_reason") or "script_failure"
            job.failure_reason = reason if reason in FAILURE_REASONS else "unknown_failure"
        job.status = p["state"]

    @endpoint("PUT", r"/jobs/(?P<id>\d+)", auth=AUTH_JOB, params={
        "token": STR, "state": one_of("running", "success", "failed"),
        "failure_reason": STR, "checksum": STR, "output": HASH, "exit_code": INT,
        "info": HASH}, required=("token",))
    def update_job(self, call):
        """PUT /jobs/:id (5.1-5.3): 200/202/412 and Job-Status; the job's state machine."""
        job, refusal = self._job_for(call, call.params.get("token"))
        if refusal is not None:
            return refusal
        p = call.params
        job.updates.append(dict(p))
        if p.get("state") not in ("success", "failed"):
            return _put_answer(job, 200)
        self._check_final_output(call, job)
        if job.accept_after > 0:
            job.accept_after -= 1          # "trace chunks still migrating"
            return _put_answer(job, 202)
        if job.trace_validation_fails:
            # The runner answers a 412 by sending the whole log again from 0;
            # the double discards its copy so that re-upload is accepted.
            job.trace_validation_fails -= 1
            job.trace = bytearray()
            job.trace_resets += 1
            return _put_answer(job, 412)
        self._finish_job(job, p)
        return _put_answer(job, 200)

    @endpoint("PATCH", r"/jobs/(?P<id>\d+)/trace", auth=AUTH_JOB_HEADER, body="raw",
              required=())
    def patch_trace(self, call):
        """PATCH /jobs/:id/trace (6.1, 6.2): append at Content-Range's start, or 403/416."""
        req = call.request
        job, refusal = self._job_for(call, req.headers.get("Job-Token"))
        if refusal is not None:
            return refusal
        crange = req.headers.get("Content-Range")
        if crange is None:
            return message(400, "400 Missing header Content-Range")
        m = CONTENT_RANGE_RE.match(crange.strip())
        if m is None:
            call.violate(f"Content-Range {crange!r} is not START-END")
            return message(400, "400 Bad request - Content-Range")
        start, end = int(m.group(1)), int(m.group(2))
        if not req.body:
            call.violate("empty trace PATCH (never send an empty patch)")
        elif end != start + len(req.body) - 1:
            call.violate(f"Content-Range {crange} does not match a body of "
                         f"{len(req.body)} bytes")
        if req.headers.get("Content-Type", "").split(";")[0].strip() != "text/plain":
            call.violate("trace PATCH without Content-Type: text/plain")
        if job.trace_size_limit is not None and start + len(req.body) > job.trace_size_limit:
            job.status, job.failure_reason = "failed", "trace_size_exceeded"
            return message(403, FORBIDDEN)
        if start != len(job.trace):
            return json_response(416, {"message": "416 Range Not Satisfiable"},
                                 [("Range", f"0-{len(job.trace)}")])
        job.trace += req.body
        return Response(202, b"", [("Job-Status", job.status),
                                   ("Range", f"0-{len(job.trace)}"),
                                   ("X-GitLab-Trace-Update-Interval", str(job.update_interval))])
