"""archive: cache-archiver / cache-extractor against zip -r / unzip on the same files.

The tree is made from a seeded generator: text lines with words and
numbers, cut into 4 KiB pieces taken at random from an 8 MiB pool, so
deflate finds about what it finds in source trees (neither a run of
zeros nor random bytes).  1 GiB is the issue's size; on a 2-core machine
the whole scenario would take minutes, so BENCH_ARCHIVE_MB (default 128)
sets the total, always in 10 000 files, and the output says which.
Peak RSS is VmHWM read from /proc while the helper runs: wait4's
ru_maxrss would be the forking Python's size, not the helper's.
"""
import os
import random
import subprocess
import time

from common import RUNNER, figure, proc_status

ID = "archive"
TITLE = "cache archive / extract vs zip / unzip"
FILES = 10_000
RUNS = 3
WORDS = ("build test runner cache artifact module config install package compile link "
         "deploy image layer error warning info debug main src lib utils network request "
         "response timeout retry success failed pipeline stage job service").split()


def _make_tree(root, total_mb):
    rnd = random.Random(7)
    lines, size = [], 0
    while size < 8 << 20:
        line = (f"{rnd.choice(WORDS)}_{rnd.choice(WORDS)}({rnd.randrange(10**6)}, "
                f"\"{' '.join(rnd.choices(WORDS, k=rnd.randrange(2, 9)))}\") "
                f"# {rnd.getrandbits(64):016x}\n")
        lines.append(line)
        size += len(line)
    pool = "".join(lines).encode()
    per_file = (total_mb << 20) // FILES
    total = 0
    for i in range(FILES):
        d = os.path.join(root, f"d{i // 100:02d}")
        if i % 100 == 0:
            os.makedirs(d)
        want = rnd.randrange(per_file // 2, per_file * 3 // 2 + 1)
        parts, got = [], 0
        while got < want:
            off = rnd.randrange(len(pool) - 4096)
            n = min(4096, want - got)
            parts.append(pool[off:off + n])
            got += n
        with open(os.path.join(d, f"f{i:05d}.txt"), "wb") as f:
            f.write(b"".join(parts))
        total += got
    return total


def _timed(argv, cwd):
    """(seconds, peak RSS KiB) of argv; polls VmHWM until the process is gone."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    hwm = 0
    while p.poll() is None:
        hwm = max(hwm, proc_status(p.pid, "VmHWM").get("VmHWM", 0))
        time.sleep(0.005)
    secs = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}: "
                           f"{p.stderr.read().decode(errors='replace')[-500:]}")
    p.stderr.close()
    return secs, hwm


def _fresh(path):
    subprocess.run(["rm", "-rf", path], check=True)
    os.makedirs(path)
    return path


def run(work):
    total_mb = int(os.environ.get("BENCH_ARCHIVE_MB", "128"))
    src = os.path.join(work, "src")
    os.makedirs(src)
    nbytes = _make_tree(os.path.join(src, "dir"), total_mb)
    mb = nbytes / 2**20
    ours_zip, zip_zip = os.path.join(work, "ours.zip"), os.path.join(work, "zip.zip")
    t = {k: [] for k in ("arch", "zip", "extr", "unzip")}
    rss = {"arch": [], "extr": []}
    for _ in range(RUNS):
        for f in (ours_zip, zip_zip):
            if os.path.exists(f):
                os.unlink(f)       # an existing up-to-date cache would be kept, not rebuilt
        s, h = _timed([RUNNER, "cache-archiver", "--file", ours_zip, "--path", "dir"], src)
        t["arch"].append(mb / s)
        rss["arch"].append(h / 1024)
        s, _ = _timed(["zip", "-qr", zip_zip, "dir"], src)
        t["zip"].append(mb / s)
        s, h = _timed([RUNNER, "cache-extractor", "--file", ours_zip],
                      _fresh(os.path.join(work, "x-ours")))
        t["extr"].append(mb / s)
        rss["extr"].append(h / 1024)
        s, _ = _timed(["unzip", "-q", zip_zip], _fresh(os.path.join(work, "x-zip")))
        t["unzip"].append(mb / s)
    shape = f"{mb:.0f} MiB in {FILES} files"
    note = None if total_mb >= 1024 else \
        f"{shape}, not the issue's 1 GiB, to keep the run short (BENCH_ARCHIVE_MB=1024 for it)"
    return [
        figure(f"cache-archiver, {shape}", t["arch"], "MiB/s", goal="≥ zip -r",
               limit=t["zip"], limit_what="zip -qr, same files", note=note),
        figure(f"cache-extractor, {shape}", t["extr"], "MiB/s", goal="≥ unzip",
               limit=t["unzip"], limit_what="unzip -q, same files"),
        figure("cache-archiver peak RSS (VmHWM)", rss["arch"], "MiB", goal="flat"),
        figure("cache-extractor peak RSS (VmHWM)", rss["extr"], "MiB", goal="flat"),
        figure("archive size / data size", os.path.getsize(ours_zip) / nbytes, "",
               limit=os.path.getsize(zip_zip) / nbytes, limit_what="zip -qr"),
    ]
