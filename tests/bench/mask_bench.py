"""mask: the masker alone (build/tools/mask_bench), 4 KiB writes, 32-byte secrets.

mask_bench also masks URL parameters and the default token prefixes, as
a real job does.  The limit is zlib's crc32 over a 64 MiB buffer: every
trace byte is checksummed anyway, so masking slower than that is the
masker's own cost.
"""
import os
import re
import subprocess

from common import TOOLS, figure
from limits import crc32_mib_s

ID = "mask"
TITLE = "masking throughput, one thread"
RUNS = 3
MB = 256
ANCHORS = {0: "431 MB/s", 1: "411 MB/s", 10: "272 MB/s", 100: "57 MB/s", 1000: "~7 MB/s"}
GOALS = {0: "≥ 1 GB/s", 100: "≥ 500 MB/s", 1000: "≥ 200 MB/s"}


def _mask_mb_s(phrases):
    out = subprocess.run([os.path.join(TOOLS, "mask_bench"), str(phrases), str(MB)],
                         check=True, capture_output=True, text=True).stdout
    return float(re.search(r"mb_per_s=([0-9.]+)", out).group(1))


def run(work):
    crc = crc32_mib_s()
    rows = []
    for n in (0, 1, 10, 100, 1000):
        rows.append(figure(f"{n} secrets", [_mask_mb_s(n) for _ in range(RUNS)], "MiB/s",
                           anchor=ANCHORS[n], goal=GOALS.get(n, "—"),
                           limit=crc, limit_what="zlib crc32, 64 MiB"))
    return rows
