"""A strict GitLab test double for the runner's integration tests.

    from gitlab_double import GitLabDouble, certs
    d = GitLabDouble().start()
    r = d.add_runner(token="glrt-t1_xxxx", id=17)
    ... run build/runner against d.url ...
    assert d.violations == []
    d.stop()

See double.py for the whole story; certs.py makes throwaway TLS files.
"""
from . import certs
from .certs import TLSFiles
from .double import (API_PREFIX, GitLabDouble, Headers, Request, Response, Rule, Runner,
                     endpoint, format_time, json_response, message, no_content, parse_time)

__all__ = ["API_PREFIX", "GitLabDouble", "Headers", "Request", "Response", "Rule", "Runner",
           "TLSFiles", "certs", "endpoint", "format_time", "json_response", "message",
           "no_content", "parse_time"]
