"""The 40 real-world config.toml files of ../shared/config-samples, through
the real binary: the valid ones load and list every entry; the invalid ones
are refused with the line of the fault."""
import json
import os
import re

import pytest

from conftest import SHARED, run_runner

SAMPLES = os.path.join(SHARED, "config-samples")

# From config-samples/README.md: file -> line of the fault.
INVALID = {
    "25-invalid-docs-ellipsis-placeholders.toml": 15,
    "26-invalid-docs-trailing-dot.toml": 14,
    "27-invalid-docs-python-template.toml": 3,
    "28-invalid-docs-ellipsis-after-datetimes.toml": 23,
    "29-invalid-windows-build-cloud.toml": 3,
    "32-invalid-real-bare-id.toml": 13,
    "40-invalid-real-redacted-datetimes.toml": 16,
}

# Doc fragments in which `runners` is a table ([runners.docker] with no
# [[runners]] before it): valid TOML, but not a config gitlab-runner can
# use.  Refused with the line of the table, as for any [runners] table.
RUNNERS_AS_TABLE = {"07-docs-docker-section-fragment.toml", "09-docs-cache-s3-fragment.toml"}


def sample_files():
    return sorted(f for f in os.listdir(SAMPLES) if f.endswith(".toml"))


def test_sample_counts(shared_dir):
    files = sample_files()
    assert len(files) == 40
    assert len([f for f in files if f not in INVALID]) == 33


def expected_runner_names(name):
    with open(os.path.join(SAMPLES, "expected", name[:-5] + ".json")) as f:
        doc = json.load(f)
    runners = doc.get("runners")
    if not isinstance(runners, list):
        return None
    return [r.get("name", {}).get("value", "") for r in runners]


@pytest.mark.parametrize("name", [f for f in sample_files() if f not in INVALID])
def test_valid_sample_loads(shared_dir, runner_bin, name):
    path = os.path.join(SAMPLES, name)
    r = run_runner(["list", "-c", path])
    if name in RUNNERS_AS_TABLE:
        assert r.returncode == 1
        assert re.search(r"^.*" + re.escape(name) + r":\d+:\d+: \[runners\] is a table", r.stderr, re.M), r.stderr
        return
    assert r.returncode == 0, r.stderr
    names = expected_runner_names(name) or []
    lines = r.stdout.splitlines()
    assert len(lines) == len(names)
    for line, want in zip(lines, names):
        assert line.startswith(want + " ") or (want == "" and line.startswith(" ")), (line, want)
        assert " Executor=" in line and " URL=" in line


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_sample_refused_with_line(shared_dir, runner_bin, name):
    path = os.path.join(SAMPLES, name)
    r = run_runner(["list", "-c", path])
    assert r.returncode == 1
    assert r.stdout == ""
    m = re.search(re.escape(path) + r":(\d+):(\d+): (.+)$", r.stderr, re.M)
    assert m, r.stderr
    assert int(m.group(1)) == INVALID[name], r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_misspelled_key_sample_warns(shared_dir, runner_bin):
    r = run_runner(["list", "-c", os.path.join(SAMPLES, "03-runner-lint-misspelled-key.toml")])
    assert r.returncode == 0
    assert re.search(r"unknown key runners\[0\]\.buids_dir \(kept as written\)", r.stderr)


def test_wrong_section_sample_warns(shared_dir, runner_bin):
    r = run_runner(["list", "-c", os.path.join(SAMPLES, "04-runner-lint-wrong-section.toml")])
    assert r.returncode == 0
    assert re.search(r"unknown key runner \(kept as written\)", r.stderr)
