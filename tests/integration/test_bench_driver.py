"""The benchmark driver (tests/bench/run.py) still runs: `make bench` is not
part of `make test`, so without this a scenario or the driver could break
unseen.  One quick scenario end to end; nothing here is about speed."""
import json
import os
import subprocess

from conftest import ROOT

RUN = os.path.join(ROOT, "tests", "bench", "run.py")


def _run(args, out):
    env = dict(os.environ, BENCH_OUT=str(out))
    return subprocess.run(["/usr/bin/python3", RUN] + args, env=env, capture_output=True,
                          text=True, timeout=300)


def test_a_scenario_prints_its_table_and_writes_json(tmp_path):
    p = _run(["startup"], tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "exec to first POST /jobs/request" in p.stdout
    assert "over HTTPS" in p.stdout
    with open(tmp_path / "startup.json") as f:
        res = json.load(f)
    rows = {r["figure"]: r for r in res["figures"]}
    first = rows["exec to first POST /jobs/request"]
    assert len(first["values"]) == 10
    assert first["min"] <= first["median"] <= first["max"]
    assert first["limit"]["values"] and first["goal"] == "≤ 50 ms"
    with open(tmp_path / "results.json") as f:
        assert list(json.load(f)["scenarios"]) == ["startup"]


def test_an_unknown_scenario_is_refused(tmp_path):
    p = _run(["nosuch"], tmp_path)
    assert p.returncode == 2
    assert "unknown scenario nosuch" in p.stderr
    assert not os.listdir(tmp_path)
