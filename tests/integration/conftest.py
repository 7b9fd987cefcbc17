"""Shared fixtures: where the repository, the binaries and ../shared are."""
import os
import subprocess

import pytest
from double_fixtures import *  # noqa: F401,F403  (gitlab, gitlab_tls, tls_files)
from packaging_fixtures import debs, docker, docker_host  # noqa: F401  (made once per run)
from docker_fixtures import docker_images, podman_engine, registry, tls_engine  # noqa: F401  (made once per run)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.environ.get("RUNNER_SHARED_DIR") or os.path.join(os.path.dirname(ROOT), "shared")
RUNNER = os.path.join(ROOT, "build", "runner")


@pytest.fixture(scope="session")
def shared_dir():
    if not os.path.isdir(os.path.join(SHARED, "toml-test")):
        pytest.fail(f"shared data not found at {SHARED}; set RUNNER_SHARED_DIR")
    return SHARED


@pytest.fixture(scope="session")
def runner_bin():
    if not os.access(RUNNER, os.X_OK):
        pytest.fail(f"{RUNNER} is missing: run make")
    return RUNNER


def run_runner(args, env=None, input=None, timeout=60):
    """Run build/runner with args; returns the CompletedProcess (text)."""
    full_env = dict(os.environ)
    full_env.pop("CONFIG_FILE", None)
    if env:
        full_env.update(env)
    return subprocess.run([RUNNER] + list(args), env=full_env, input=input,
                          capture_output=True, text=True, timeout=timeout)
