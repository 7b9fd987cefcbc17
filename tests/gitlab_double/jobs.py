"""Jobs on the double: PUT /jobs/:id and PATCH /jobs/:id/trace, and handing
out queued jobs to POST /jobs/request (protocol.md 4.3, 5, 6, 13).

Kept apart from double.py so the runner endpoints stay readable; the
endpoints here are collected the same way (GitLabDouble inherits JobsMixin).
Job-scoped calls carry the job token: in the JSON body and the Job-Token
header for PUT (they must agree), in Job-Token alone for PATCH.
"""
import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Optional

from .double import (AUTH_JOB, AUTH_JOB_HEADER, FORBIDDEN, HASH, INT, STR, Response,
                     endpoint, json_response, message, one_of)

CONTENT_RANGE_RE = re.compile(r"^(\d+)-(\d+)$")
ACTIVE = ("running", "canceling")


@dataclass
class Job:
    """A job as GitLab sees it: its status, the log received, every update."""
    id: int
    token: str
    payload: dict
    runner_id: Optional[int] = None     # None: any runner may take it
    status: str = "pending"
    trace: bytearray = field(default_factory=bytearray)
    updates: list = field(default_factory=list)     # JSON bodies of every PUT accepted
    final: Optional[dict] = None                    # the PUT that ended it
    update_interval: int = 3                        # X-GitLab-Trace-Update-Interval

    @property
    def log(self):
        return bytes(self.trace)


def _job_headers(job):
    return [("Job-Status", job.status),
            ("X-GitLab-Trace-Update-Interval", str(job.update_interval))]


class JobsMixin:
    """Job state and endpoints; needs GitLabDouble's lock and records."""

    def _jobs_init(self):
        self.jobs = {}
        self._next_job_id = 5000

    def add_job(self, payload=None, id=None, token=None, status="pending", runner=None):
        """Queue a job (pending: the next job request may get it); returns the Job."""
        with self._lock:
            if id is None:
                id = self._next_job_id
            self._next_job_id = max(self._next_job_id, id + 1)
            token = token or "glcbt-64_" + secrets.token_urlsafe(15)
            body = {"id": id, "token": token, "allow_git_fetch": True,
                    "job_info": {"id": id, "name": "test", "stage": "test",
                                 "project_id": 1, "project_name": "p",
                                 "project_full_path": "g/p"},
                    "git_info": {}, "runner_info": {"timeout": 3600},
                    "variables": [], "steps": [], "features": {}}
            body.update(payload or {})
            body["id"], body["token"] = id, token
            job = Job(id=id, token=token, payload=body, status=status,
                      runner_id=runner.id if runner is not None else None)
            self.jobs[id] = job
            return job

    def job(self, id):
        with self._lock:
            return self.jobs.get(id)

    def _pick_job(self, runner, call):
        for job in self.jobs.values():
            if job.status == "pending" and job.runner_id in (None, runner.id):
                job.status = "running"
                job.runner_id = runner.id
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

    @endpoint("PUT", r"/jobs/(?P<id>\d+)", auth=AUTH_JOB, params={
        "token": STR, "state": one_of("running", "success", "failed"),
        "failure_reason": STR, "checksum": STR, "output": HASH, "exit_code": INT,
        "info": HASH}, required=("token",))
    def update_job(self, call):
        """PUT /jobs/:id (5.1, 5.2): 200 and Job-Status; the state machine of a job."""
        job, refusal = self._job_for(call, call.params.get("token"))
        if refusal is not None:
            return refusal
        p = call.params
        job.updates.append(dict(p))
        state = p.get("state")
        if state in ("success", "failed"):
            job.final = dict(p)
            job.status = "canceled" if job.status == "canceling" else state
        return Response(200, b"200", [("Content-Type", "text/plain")] + _job_headers(job))

    @endpoint("PATCH", r"/jobs/(?P<id>\d+)/trace", auth=AUTH_JOB_HEADER, body="raw",
              required=())
    def patch_trace(self, call):
        """PATCH /jobs/:id/trace (6.1, 6.2): append at Content-Range's start or 416."""
        req = call.request
        job, refusal = self._job_for(call, req.headers.get("Job-Token"))
        if refusal is not None:
            return refusal
        crange = req.headers.get("Content-Range")
        if crange is None:
            return message(400, "400 Bad request - Missing header Content-Range")
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
        if start != len(job.trace):
            return Response(416, b"", [("Range", f"0-{len(job.trace)}")] + _job_headers(job))
        job.trace += req.body
        return Response(202, b"", [("Range", f"0-{len(job.trace)}")] + _job_headers(job))
