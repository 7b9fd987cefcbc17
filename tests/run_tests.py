#!/usr/bin/python3
"""Run every test and end with one line: "total: N passed, N failed".

`make test` builds everything, then calls this.  It runs each cmocka unit
test binary twice (build/tests/ plain, build/asan/tests/ under ASan+UBSan),
then the pytest integration suite, and prints what each part counted.  A
unit binary that crashes or exits non-zero without reporting a failure
counts as one failed test, so a sanitizer abort is never lost.

Environment: PYTEST_ARGS adds arguments to pytest (e.g. "-k toml").
"""
import os
import re
import shlex
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UNIT_TIMEOUT = 600


def run_unit_dir(label, directory):
    passed = failed = 0
    if not os.path.isdir(directory):
        print(f"{label}: no unit tests built in {directory}", flush=True)
        return 0, 1
    env = dict(os.environ, CMOCKA_MESSAGE_OUTPUT="TAP")
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if not (name.startswith("test_") and os.access(path, os.X_OK)):
            continue
        start = time.monotonic()
        try:
            proc = subprocess.run([path], cwd=ROOT, env=env, capture_output=True,
                                  timeout=UNIT_TIMEOUT)
            out = proc.stdout.decode("utf-8", "replace")
            err = proc.stderr.decode("utf-8", "replace")
            code = proc.returncode
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode("utf-8", "replace")
            err = f"timed out after {UNIT_TIMEOUT} s"
            code = -1
        ok = len(re.findall(r"^ok \d+", out, re.M))
        # cmocka's TAP writes a skipped test as "not ok N # SKIP name".
        bad = len(re.findall(r"^not ok \d+(?!\d| # SKIP)", out, re.M))
        if code != 0 and bad == 0:
            bad = 1  # crashed, aborted by a sanitizer, or timed out
        passed += ok
        failed += bad
        secs = time.monotonic() - start
        status = "ok" if bad == 0 else "FAILED"
        print(f"  {label:12} {name:28} {ok:4} passed {bad:3} failed "
              f"{secs:6.2f}s  {status}", flush=True)
        if bad:
            sys.stdout.write(out[-6000:])
            sys.stdout.write(err[-6000:])
            sys.stdout.flush()
    return passed, failed


def run_pytest():
    report = os.path.join(ROOT, "build", "pytest.xml")
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "-rfEs", f"--junitxml={report}", "tests/integration"]
    args += shlex.split(os.environ.get("PYTEST_ARGS", ""))
    if os.path.exists(report):
        os.unlink(report)
    proc = subprocess.run(args, cwd=ROOT)
    if not os.path.exists(report):
        return 0, 1, 0
    root = ET.parse(report).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    tests = failures = skipped = 0
    for s in suites:
        tests += int(s.get("tests", 0))
        failures += int(s.get("failures", 0)) + int(s.get("errors", 0))
        skipped += int(s.get("skipped", 0))
    if proc.returncode not in (0, 1) and failures == 0:
        failures = 1  # pytest itself failed (collection error, crash)
    return tests - failures - skipped, failures, skipped


def main():
    results = []
    print("unit tests (plain):", flush=True)
    results.append(("unit", *run_unit_dir("plain", os.path.join(ROOT, "build", "tests")), 0))
    print("unit tests (ASan+UBSan):", flush=True)
    results.append(("unit-asan", *run_unit_dir("asan", os.path.join(ROOT, "build", "asan", "tests")), 0))
    print("integration tests (pytest):", flush=True)
    results.append(("integration", *run_pytest()))

    print()
    total_p = total_f = total_s = 0
    for label, p, f, s in results:
        extra = f", {s} skipped" if s else ""
        print(f"{label:12} {p} passed, {f} failed{extra}")
        total_p, total_f, total_s = total_p + p, total_f + f, total_s + s
    extra = f", {total_s} skipped" if total_s else ""
    print(f"total: {total_p} passed, {total_f} failed{extra}", flush=True)
    return 0 if total_f == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
