"""Pytest fixtures for the GitLab double.

conftest.py does `from double_fixtures import *`; __all__ below is what
that brings in, including the pytest_configure hook (hooks in an imported
module count only when they are names in conftest's namespace).

Every double a fixture starts is stopped at teardown, and the test fails
if the client broke the protocol (d.violations) or the double itself hit a
bug (d.errors), unless the test is marked @pytest.mark.allow_violations.
"""
import os
import sys

import pytest

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from gitlab_double import GitLabDouble, certs  # noqa: E402

__all__ = ["pytest_configure", "tls_files", "gitlab", "gitlab_tls", "gitlab_factory"]


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "allow_violations: the GitLab double may record client protocol "
        "violations in this test (the fixtures do not fail it for them)")


def _teardown_check(request, doubles):
    errors = [e for d in doubles for e in d.errors]
    if errors:
        pytest.fail("the GitLab double itself failed:\n" + "\n".join(errors), pytrace=False)
    if request.node.get_closest_marker("allow_violations"):
        return
    violations = [v for d in doubles for v in d.violations]
    if violations:
        summary = "\n".join(d.summary() for d in doubles)
        pytest.fail("the client broke the protocol (GitLab double violations):\n  "
                    + "\n  ".join(violations) + "\nrequests:\n" + summary, pytrace=False)


@pytest.fixture
def gitlab_factory(request):
    """make(**kwargs) -> a started GitLabDouble(**kwargs); all stopped and checked at teardown."""
    doubles = []

    def make(**kwargs):
        d = GitLabDouble(**kwargs).start()
        doubles.append(d)
        return d

    try:
        yield make
    finally:
        for d in doubles:
            d.stop()
    _teardown_check(request, doubles)


@pytest.fixture
def gitlab(gitlab_factory):
    """A started plain-HTTP double (d.url is http://127.0.0.1:PORT)."""
    return gitlab_factory()


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory):
    """Throwaway CA, server and client certificates, made once per session."""
    return certs.generate(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def gitlab_tls(gitlab_factory, tls_files):
    """A started HTTPS double (server cert for 127.0.0.1/localhost, signed by tls_files.ca_cert)."""
    return gitlab_factory(tls=tls_files)
