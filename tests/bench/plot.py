"""Pictures from the figures: gnuplot (Debian's gnuplot-nox) draws SVG under build/bench/.

- memory.svg: daemon memory against concurrent jobs (jobs100 writes
  jobs100_memory.dat), with gitlab-runner's published line beside ours;
- mask.svg: masking throughput against the number of secrets (mask.json),
  with gitlab-runner's published figures beside ours.

A picture whose data is missing (its scenario did not run) is skipped; a
missing gnuplot is said once and is not an error, as a benchmark only
measures.
"""
import json
import os
import shutil
import subprocess
import sys

from common import OUT

# gitlab-runner's published masking figures (MB/s), as in mask_bench.ANCHORS.
MASK_ANCHOR = {0: 431, 1: 411, 10: 272, 100: 57, 1000: 7}

STYLE = """
set terminal svg size 720,420 dynamic font "sans,12" background rgb "white"
set grid
"""


def _gnuplot(script, out):
    subprocess.run(["gnuplot"], input=STYLE + f'set output "{out}"\n' + script,
                   text=True, check=True)
    return out


def _memory():
    dat = os.path.join(OUT, "jobs100_memory.dat")
    if not os.path.exists(dat):
        return None
    return _gnuplot(f"""
set title "Daemon memory against concurrent jobs"
set key top left
set xlabel "concurrent jobs"
set ylabel "MiB"
set yrange [0:*]
plot "{dat}" using 1:4 with linespoints lw 2 title "gitlab-runner, MB: 40 + 3.29/job (369 at 100, published)", \\
     "{dat}" using 1:2 with linespoints lw 2 title "runner: VmRSS", \\
     "{dat}" using 1:3 with linespoints lw 2 title "runner: RssAnon"
""", os.path.join(OUT, "memory.svg"))


def _mask():
    src = os.path.join(OUT, "mask.json")
    if not os.path.exists(src):
        return None
    with open(src) as f:
        res = json.load(f)
    ours = {}
    for row in res.get("figures", []):
        n = row["figure"].split()[0]
        if n.isdigit():
            ours[int(n)] = row
    if not ours:
        return None
    dat = os.path.join(OUT, "mask.dat")
    with open(dat, "w") as f:
        f.write("# secrets ours_median ours_min ours_max gitlab-runner (all MB/s)\n")
        for n in sorted(ours):
            r = ours[n]
            mb = 2**20 / 1e6                # ours are MiB/s, the anchors MB/s
            f.write(f"{max(n, 0.5)} {r['median'] * mb:.1f} {r['min'] * mb:.1f} "
                    f"{r['max'] * mb:.1f} {MASK_ANCHOR.get(n, 'NaN')}\n")
    # Zero secrets sits at 0.5 on the log axis, labelled 0.
    return _gnuplot(f"""
set title "Masking throughput against the number of secrets (one thread)"
set key top right
set xlabel "secrets (32 bytes each)"
set ylabel "MB/s"
set logscale xy
set xtics ("0" 0.5, "1" 1, "10" 10, "100" 100, "1000" 1000)
set xrange [0.35:1500]
plot "{dat}" using 1:5 with linespoints lw 2 title "gitlab-runner (published)", \\
     "{dat}" using 1:2:3:4 with yerrorlines lw 2 title "runner (median, min..max)"
""", os.path.join(OUT, "mask.svg"))


def draw():
    """Draw what the data allows; return the paths written."""
    if shutil.which("gnuplot") is None:
        print("bench: gnuplot not found (packaging/install-deps.sh installs gnuplot-nox);"
              " no pictures", file=sys.stderr)
        return []
    return [p for p in (_memory(), _mask()) if p]


if __name__ == "__main__":
    for path in draw():
        print(path)
