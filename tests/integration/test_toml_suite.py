"""The TOML parser against external data, through build/tools/toml_decode.

Two data sets from the shared directory (RUNNER_SHARED_DIR, default
<repo>/../shared):

- toml-test (the TOML 1.0.0 subset): every valid document must decode to
  its expected JSON, every invalid one must be rejected;
- config-samples: real gitlab-runner config.toml files; the valid ones must
  decode to expected/*.json, the invalid ones must be rejected on the line
  that tomllib names.

Both the plain and the ASan+UBSan decoder run; a sanitizer report makes the
decoder exit non-zero, which fails the batch.  Files go to the decoder in
batches, one JSON line back per file.  Comparison follows the rules in
toml-test/README.md: key order is irrelevant, floats compare as numbers
(nan equal to nan), datetimes as values, integers and strings exactly.
"""

import json
import math
import os
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("RUNNER_SHARED_DIR", REPO.parent / "shared"))
TOML_TEST = SHARED / "toml-test"
SAMPLES = SHARED / "config-samples"

DECODERS = ["build/tools/toml_decode", "build/asan/tools/toml_decode"]
BATCH = 100
BATCH_TIMEOUT = 120

# From the table in config-samples/README.md: the line of the first error.
INVALID_SAMPLE_LINES = {
    "25-invalid-docs-ellipsis-placeholders.toml": 15,
    "26-invalid-docs-trailing-dot.toml": 14,
    "27-invalid-docs-python-template.toml": 3,
    "28-invalid-docs-ellipsis-after-datetimes.toml": 23,
    "29-invalid-windows-build-cloud.toml": 3,
    "32-invalid-real-bare-id.toml": 13,
    "40-invalid-real-redacted-datetimes.toml": 16,
}

ERROR_RE = re.compile(r"^(\d+):(\d+): (\S.*)$")
_DATE = r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})"
_TIME = (r"(?P<hour>\d{2}):(?P<minute>\d{2}):(?P<second>\d{2})"
         r"(?:\.(?P<frac>\d+))?")
_OFFSET = r"(?P<offset>[Zz]|[+-]\d{2}:\d{2})"
DATETIME_RE = {
    "datetime": re.compile(f"^{_DATE}[Tt ]{_TIME}{_OFFSET}$"),
    "datetime-local": re.compile(f"^{_DATE}[Tt ]{_TIME}$"),
    "date-local": re.compile(f"^{_DATE}$"),
    "time-local": re.compile(f"^{_TIME}$"),
}


def decoder_path(rel):
    path = REPO / rel
    if not os.access(path, os.X_OK):
        pytest.fail(f"{rel} is missing or not executable: run "
                    f"`make {rel}` (or `make tools`) in {REPO} first",
                    pytrace=False)
    return path


@lru_cache(maxsize=None)
def decode(rel, files):
    """Run the decoder over files (a tuple of paths) in batches."""
    path = decoder_path(rel)
    results = {}
    for i in range(0, len(files), BATCH):
        batch = files[i:i + BATCH]
        proc = subprocess.run([str(path), *batch], capture_output=True,
                              timeout=BATCH_TIMEOUT)
        stderr = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode == 0, (
            f"{rel} exited {proc.returncode} on a batch starting with "
            f"{batch[0]}:\n{stderr[-4000:]}")
        for line in proc.stdout.decode("utf-8").splitlines():
            obj = json.loads(line)
            results[obj["file"]] = obj
    missing = [f for f in files if f not in results]
    assert not missing, f"{rel} printed nothing for {missing[:10]}"
    return results


def toml_files(kind):
    root = TOML_TEST / kind
    if not root.is_dir():
        pytest.fail(f"{root} not found: set RUNNER_SHARED_DIR", pytrace=False)
    return tuple(sorted(str(p) for p in root.rglob("*.toml")))


def sample_files(invalid):
    if not SAMPLES.is_dir():
        pytest.fail(f"{SAMPLES} not found: set RUNNER_SHARED_DIR",
                    pytrace=False)
    return tuple(sorted(str(p) for p in SAMPLES.glob("*.toml")
                        if ("invalid" in p.name) == invalid))


def report(capsys, text):
    # Shown even when the test passes and pytest runs with -q.
    with capsys.disabled():
        sys.stderr.write(f"\n{text}\n")
        sys.stderr.flush()


# Comparison ---------------------------------------------------------------

def is_scalar(obj):
    return (isinstance(obj, dict) and set(obj) == {"type", "value"}
            and isinstance(obj["type"], str))


def datetime_fields(kind, text):
    """The fields of a date-time of the given kind, or None if malformed.

    Fractions compare as numbers (.6 == .600) and offsets as minutes, so
    Z, z and +00:00 are one value."""
    m = DATETIME_RE[kind].match(text)
    if not m:
        return None
    fields = m.groupdict()
    frac = fields.pop("frac", None)
    offset = fields.pop("offset", None)
    fields = {k: int(v) for k, v in fields.items()}
    if kind != "date-local":
        fields["nanosecond"] = int((frac or "").ljust(9, "0")[:9])
    if offset in ("Z", "z"):
        fields["offset"] = 0
    elif offset is not None:
        sign = -1 if offset[0] == "-" else 1
        fields["offset"] = sign * (int(offset[1:3]) * 60 + int(offset[4:6]))
    return fields


def scalar_equal(want, have):
    kind, w, h = want["type"], want["value"], have["value"]
    if kind in ("string", "integer"):
        return w == h
    if kind == "bool":
        return w.lower() == h.lower()
    if kind == "float":
        wl, hl = w.lower(), h.lower()
        if wl.endswith("nan") or hl.endswith("nan"):
            return wl.lstrip("+-") == hl.lstrip("+-")
        try:
            return float(wl) == float(hl)
        except ValueError:
            return False
    if kind in ("datetime", "datetime-local", "date-local", "time-local"):
        fw, fh = datetime_fields(kind, w), datetime_fields(kind, h)
        return fw is not None and fw == fh
    return False


def difference(want, have, path="$"):
    """None when equal, else a description of the first difference."""
    if is_scalar(want):
        if not is_scalar(have) or have["type"] != want["type"]:
            return f"{path}: want {want}, have {json.dumps(have)[:200]}"
        if not scalar_equal(want, have):
            return f"{path}: want {want}, have {have}"
        return None
    if isinstance(want, dict):
        if not isinstance(have, dict) or is_scalar(have):
            return f"{path}: want a table, have {json.dumps(have)[:200]}"
        if set(want) != set(have):
            return (f"{path}: keys differ: missing {sorted(set(want) - set(have))}"
                    f", extra {sorted(set(have) - set(want))}")
        for key in want:
            diff = difference(want[key], have[key], f"{path}.{key}")
            if diff:
                return diff
        return None
    if isinstance(want, list):
        if not isinstance(have, list) or len(have) != len(want):
            return f"{path}: want an array of {len(want)}, have {json.dumps(have)[:200]}"
        for i, (w, h) in enumerate(zip(want, have)):
            diff = difference(w, h, f"{path}[{i}]")
            if diff:
                return diff
        return None
    return f"{path}: unexpected {want!r} in the expected JSON"


def check_valid(results, files, expected_of):
    failures = []
    for f in files:
        res = results[f]
        if not res["ok"]:
            failures.append(f"{f}: rejected: {res['error']}")
            continue
        with open(expected_of(f), encoding="utf-8") as fp:
            want = json.load(fp)
        diff = difference(want, res["doc"])
        if diff:
            failures.append(f"{f}: {diff}")
    return failures


# toml-test ----------------------------------------------------------------

def test_toml_test_data_present():
    assert len(toml_files("valid")) == 210
    assert len(toml_files("invalid")) == 499


@pytest.mark.parametrize("decoder", DECODERS)
def test_toml_test_valid(decoder, capsys):
    files = toml_files("valid")
    results = decode(decoder, files)
    failures = check_valid(results, files,
                           lambda f: Path(f).with_suffix(".json"))
    passed = len(files) - len(failures)
    report(capsys, f"toml-test [{decoder}]: valid {passed}/{len(files)}")
    assert not failures, (f"valid {passed}/{len(files)}; failing:\n"
                          + "\n".join(failures))
    assert passed == 210


@pytest.mark.parametrize("decoder", DECODERS)
def test_toml_test_invalid(decoder, capsys):
    files = toml_files("invalid")
    results = decode(decoder, files)
    failures = [f"{f}: accepted" for f in files if results[f]["ok"]]
    malformed = [f"{f}: error not LINE:COL: message: {results[f]['error']!r}"
                 for f in files if not results[f]["ok"]
                 and not ERROR_RE.match(results[f]["error"])]
    passed = len(files) - len(failures)
    report(capsys, f"toml-test [{decoder}]: invalid {passed}/{len(files)}")
    assert not failures, (f"invalid {passed}/{len(files)}; accepted:\n"
                          + "\n".join(failures))
    assert not malformed, "\n".join(malformed)
    assert passed == 499


# config-samples -----------------------------------------------------------

def test_config_samples_present():
    assert len(sample_files(invalid=False)) == 33
    invalid = sorted(Path(f).name for f in sample_files(invalid=True))
    assert invalid == sorted(INVALID_SAMPLE_LINES)


@pytest.mark.parametrize("decoder", DECODERS)
def test_config_samples_valid(decoder, capsys):
    files = sample_files(invalid=False)
    results = decode(decoder, files)
    failures = check_valid(
        results, files,
        lambda f: SAMPLES / "expected" / (Path(f).stem + ".json"))
    passed = len(files) - len(failures)
    report(capsys, f"config-samples [{decoder}]: valid {passed}/{len(files)}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("decoder", DECODERS)
def test_config_samples_invalid_lines(decoder, capsys):
    files = sample_files(invalid=True)
    results = decode(decoder, files)
    failures = []
    for f in files:
        res, want = results[f], INVALID_SAMPLE_LINES[Path(f).name]
        if res["ok"]:
            failures.append(f"{f}: accepted")
            continue
        m = ERROR_RE.match(res["error"])
        if not m or int(m.group(1)) != want:
            failures.append(f"{f}: want line {want}, have {res['error']!r}")
    passed = len(files) - len(failures)
    report(capsys, f"config-samples [{decoder}]: invalid {passed}/{len(files)} "
                   "rejected on the expected line")
    assert not failures, "\n".join(failures)
