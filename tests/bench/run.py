#!/usr/bin/python3
"""`make bench [B=id]`: run the benchmark scenarios, print one table, write JSON.

    /usr/bin/python3 tests/bench/run.py [ID...]

Each scenario is a module here, <id>_bench.py (ID, TITLE, run(workdir) ->
figures; see common.py).  A benchmark only measures: slowness is printed, never an
error.  The exit status is non-zero only when a scenario could not run.
Results: build/bench/results.json (all) and build/bench/<id>.json.
"""
import importlib
import json
import os
import shutil
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot  # noqa: E402
from common import OUT, ROOT  # noqa: E402

SCENARIOS = ["limits", "startup", "mask", "archive", "idle", "trace", "jobs100", "overhead",
             "tls", "economy", "pickup", "storm", "outage", "docker", "soak"]     # the order `make bench` runs them


def _num(v):
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


def _ours(row):
    unit = row["unit"]
    if len(row["values"]) == 1:
        return f"{_num(row['median'])} {unit}"
    return (f"{_num(row['median'])} {unit} ({_num(row['min'])}..{_num(row['max'])},"
            f" {len(row['values'])} runs)")


def _limit(row):
    lim = row.get("limit")
    if not lim:
        return "—"
    return f"{_num(lim['median'])} {lim['unit']} ({lim['what']})"


def print_table(results):
    head = ["scenario", "figure", "ours (median, min..max)", "anchor", "goal", "limit"]
    lines = [[sid, r["figure"], _ours(r), r["anchor"], r["goal"], _limit(r)]
             for sid, res in results.items() for r in res.get("figures", [])]
    lines += [[sid, "(could not run)", res["error"], "", "", ""]
              for sid, res in results.items() if res.get("error")]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)]
    fmt = " | ".join(f"{{:<{w}}}" for w in widths)
    print(fmt.format(*head))
    print("-+-".join("-" * w for w in widths))
    for line in lines:
        print(fmt.format(*line))
    for sid, res in results.items():
        for r in res.get("figures", []):
            if r.get("note"):
                print(f"note ({sid}, {r['figure']}): {r['note']}")


def main(argv):
    ids = argv or SCENARIOS
    unknown = [i for i in ids if i not in SCENARIOS]
    if unknown:
        print(f"bench: unknown scenario {', '.join(unknown)}; known: {' '.join(SCENARIOS)}",
              file=sys.stderr)
        return 2
    os.makedirs(OUT, exist_ok=True)
    results, failed = {}, False
    for sid in ids:
        # <id>_bench.py: a bare "trace" would be the standard library's.
        mod = importlib.import_module(f"{sid}_bench")
        print(f"bench: {sid}: {mod.TITLE} ...", file=sys.stderr, flush=True)
        work = tempfile.mkdtemp(prefix=f"runner-bench-{sid}.")
        t0 = time.monotonic()
        try:
            res = {"id": sid, "title": mod.TITLE, "figures": mod.run(work)}
        except Exception as e:                   # the scenario itself broke: say so, go on
            traceback.print_exc()
            res = {"id": sid, "title": mod.TITLE, "error": f"{type(e).__name__}: {e}"}
            failed = True
        finally:
            shutil.rmtree(work, ignore_errors=True)
        res["seconds"] = round(time.monotonic() - t0, 1)
        results[sid] = res
        with open(os.path.join(OUT, f"{sid}.json"), "w") as f:
            json.dump(res, f, indent=1, ensure_ascii=False)
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "machine": {"cpus": os.cpu_count(), "uname": " ".join(os.uname())},
                   "scenarios": results}, f, indent=1, ensure_ascii=False)
    print_table(results)
    for path in plot.draw():
        print(f"picture: {os.path.relpath(path, ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
