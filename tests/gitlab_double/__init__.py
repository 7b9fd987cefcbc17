"""A strict GitLab test double for the runner's integration tests.

    from gitlab_double import GitLabDouble, certs, job_payload
    d = GitLabDouble(long_poll=2).start()
    r = d.add_runner(token="glrt-t1_xxxx", id=17)
    job = d.add_job(job_payload(script=["echo hi"]), runner=r)
    ... run build/runner against d.url ...
    d.wait_for_job(job, "success", timeout=30)
    assert job.log_text.endswith("Job succeeded\\n") and job.checksum_ok
    assert d.violations == []
    d.stop()

See double.py for the whole story (jobs.py: jobs and their endpoints,
artifacts.py: artifact upload/download and object storage, payloads.py:
job payloads, workhorse.py: long polling); certs.py makes
throwaway TLS files; `python3 -m gitlab_double` runs it standalone.
"""
from . import certs
from .certs import TLSFiles
from .double import (API_PREFIX, GitLabDouble, Headers, Request, Response, Rule, Runner,
                     endpoint, format_time, json_response, message, no_content, parse_time,
                     poll_until)
from .artifacts import Artifact, ArtifactUpload, parse_multipart  # noqa: I001 (after double)
from .jobs import FINAL_STATUSES, JOB_OPTIONS, Job, crc32_checksum
from .payloads import FAILURE_REASONS, job_payload, normalize_variables, variable

__all__ = ["API_PREFIX", "Artifact", "ArtifactUpload", "FAILURE_REASONS", "FINAL_STATUSES",
           "GitLabDouble", "Headers", "JOB_OPTIONS", "Job", "Request", "Response", "Rule",
           "Runner", "TLSFiles", "certs", "crc32_checksum", "endpoint", "format_time",
           "job_payload", "json_response", "message", "no_content", "normalize_variables",
           "parse_multipart", "parse_time", "poll_until", "variable"]
