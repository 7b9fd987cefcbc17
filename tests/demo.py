#!/usr/bin/python3
"""`make demo`.

The end-to-end demo (a pipeline run by the daemon against the GitLab double)
arrives with `runner run` (issue 4).  Until then this shows, for real, what
the build can do today: its version and `runner list` on the example config.
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNNER = os.path.join(ROOT, "build", "runner")


def show(args):
    print("$ runner " + " ".join(args), flush=True)
    return subprocess.run([RUNNER] + args, cwd=ROOT).returncode


def main():
    rc = show(["--version"])
    rc |= show(["list", "-c", "config.toml.example"])
    print("\nThe job demo needs `runner run`, which is not built yet (issue 4).")
    return rc


if __name__ == "__main__":
    sys.exit(main())
