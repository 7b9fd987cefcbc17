"""tls: short jobs over HTTPS through a throwaway CA (tests/gitlab_double/certs.py).

The runner trusts the CA with tls-ca-file, as test_tls.py configures it.
The double counts accepted connections and completed TLS handshakes.

- sequential: SEQ short jobs (`echo hi`) queued at once for one entry with
  concurrent = 1; after the first WARM jobs, every handshake the double
  completes is counted, per job (goal 0: the connection is reused);
- concurrent: CONC jobs (`sleep 2`) with concurrent = CONC, on a fresh
  double; the peak of connections open at once (one host), handshakes per
  job, and how many stay open when the jobs are done;
- new-connection cost, on the client: build/tools/conn_bench opens fresh
  connections on one curl multi handle with api/http.c's CA options
  (CURLOPT_CAPATH unset, CURLOPT_CAINFO a bundle of the system CAs and the
  test CA), and reads CURLINFO_APPCONNECT_TIME_T - CURLINFO_CONNECT_TIME_T.
  The limit is the same handshake trusting the test CA alone.  Beside it:
  the same bundle with libcurl's built-in CAPATH left set (no CA cache:
  the bundle is parsed per connection), and `curl --cacert` itself.

BENCH_TLS_JOBS and BENCH_TLS_CONCURRENT set the job counts (defaults: the
issue's 200 and 100).
"""
import os
import subprocess
import time

from common import figure, start_daemon, stop_daemon
from limits import conn_bench

ID = "tls"
TITLE = "jobs over HTTPS: handshakes, connections per host, new-connection cost"
WARM = 3
ROUNDS = 5
FRESH = 30          # new connections measured with the runner's CA options, in all
CAPATH_FRESH = 10   # ... and with CAPATH left set (~30 ms each)
CLI_RUNS = 1        # `curl --cacert` per round


def _write_config(gitlab, runner, files, work, concurrent):
    from daemon_helpers import config_text, entry

    os.makedirs(work, exist_ok=True)
    cfg = os.path.join(work, "config.toml")
    with open(cfg, "w") as f:
        f.write(config_text([entry(gitlab, runner, "tls", builds_dir=os.path.join(work, "b"),
                                   **{"tls-ca-file": files.ca_cert})],
                            concurrent=concurrent))
    return cfg


def _queue(gitlab, runner, n, script):
    from daemon_helpers import without_sources
    from gitlab_double import job_payload

    return [gitlab.add_job(job_payload(script=script, variables=without_sources()),
                           runner=runner) for _ in range(n)]


def _check(jobs, gitlab, what):
    bad = [j for j in jobs if j.status != "success"]
    if bad:
        raise RuntimeError(f"{what}: {len(bad)} of {len(jobs)} jobs did not succeed, e.g. job "
                           f"{bad[0].id} {bad[0].status}: {bad[0].report()['log'][-400:]}")
    if gitlab.tls_failures:
        raise RuntimeError(f"{what}: TLS handshakes failed: {gitlab.tls_failures[:3]}")


def _sequential(files, work, n):
    from daemon_helpers import new_token
    from gitlab_double import GitLabDouble

    gitlab = GitLabDouble(tls=files).start()
    try:
        r = gitlab.add_runner(token=new_token())
        cfg = _write_config(gitlab, r, files, work, 1)
        jobs = _queue(gitlab, r, n, ["echo hi"])
        p = start_daemon(cfg, work)
        try:
            for j in jobs[:WARM]:
                gitlab.wait_for_job(j, ("success", "failed"), timeout=120)
            hs0, req0 = gitlab.tls_handshakes, len(gitlab.requests)
            for j in jobs[WARM:]:
                gitlab.wait_for_job(j, ("success", "failed"), timeout=120)
            hs1, req1 = gitlab.tls_handshakes, len(gitlab.requests)
        finally:
            stop_daemon(p)
        _check(jobs, gitlab, "sequential jobs")
        return {"per_job": (hs1 - hs0) / (n - WARM), "total": hs1,
                "requests_per_job": (req1 - req0) / (n - WARM),
                "violations": gitlab.violations}
    finally:
        gitlab.stop()


def _concurrent(files, work, n):
    from daemon_helpers import new_token
    from gitlab_double import GitLabDouble

    gitlab = GitLabDouble(tls=files).start()
    try:
        r = gitlab.add_runner(token=new_token())
        cfg = _write_config(gitlab, r, files, work, n)
        jobs = _queue(gitlab, r, n, ["sleep 2"])
        p = start_daemon(cfg, work)
        running = 0
        try:
            deadline = time.monotonic() + 60 + 2 * n
            while not gitlab.jobs_final([j.id for j in jobs]):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"concurrent jobs: not all final after {60 + 2 * n} s")
                if p.poll() is not None:
                    raise RuntimeError(f"runner run exited {p.returncode}")
                running = max(running, sum(j.status == "running" for j in jobs))
                time.sleep(0.05)
            # What libcurl keeps once the burst is over (its cache, not the double's timeout).
            time.sleep(1)
            idle = gitlab.open_connections
        finally:
            stop_daemon(p)
        _check(jobs, gitlab, "concurrent jobs")
        return {"peak": gitlab.max_open_connections, "handshakes": gitlab.tls_handshakes,
                "idle": idle, "running": running, "violations": gitlab.violations}
    finally:
        gitlab.stop()


def _curl_cli(url, ca):
    out = []
    for _ in range(CLI_RUNS):
        text = subprocess.run(
            ["curl", "-s", "-o", "/dev/null", "--cacert", ca, "-A", "runner bench",
             "-H", "X-Request-Id: 0123456789abcdef0123456789abcdef",
             "-w", "%{time_connect} %{time_appconnect}", url + "/api/v4/conn-bench"],
            check=True, capture_output=True, text=True).stdout.split()
        out.append((float(text[1]) - float(text[0])) * 1e3)
    return out


def _new_connection(files):
    from gitlab_double import GitLabDouble

    ms = lambda rows: [r["tls_us"] / 1e3 for r in rows]  # noqa: E731
    gitlab = GitLabDouble(tls=files).start()
    out = {"first": [], "runner": [], "alone": [], "capath": [], "cli": []}
    try:
        # In rounds, so that a burst of load from elsewhere hits every kind alike;
        # each conn_bench is a new process, whose first connection builds the store.
        for _ in range(ROUNDS):
            runner = ms(conn_bench("runner", gitlab.url, FRESH // ROUNDS + 1, files.ca_cert))
            out["first"].append(runner[0])
            out["runner"] += runner[1:]
            out["alone"] += ms(conn_bench("cacert", gitlab.url, FRESH // ROUNDS + 1,
                                          files.ca_cert))[1:]
            out["capath"] += ms(conn_bench("capath", gitlab.url, CAPATH_FRESH // ROUNDS,
                                           files.ca_cert))
            out["cli"] += _curl_cli(gitlab.url, files.ca_cert)
        if gitlab.tls_failures:
            raise RuntimeError(f"TLS handshakes failed: {gitlab.tls_failures[:3]}")
    finally:
        gitlab.stop()
    return out


def run(work):
    from gitlab_double import certs

    seq_n = int(os.environ.get("BENCH_TLS_JOBS", "200"))
    conc_n = int(os.environ.get("BENCH_TLS_CONCURRENT", "100"))
    files = certs.generate(os.path.join(work, "tls"))
    conn = _new_connection(files)
    seq = _sequential(files, os.path.join(work, "seq"), seq_n)
    conc = _concurrent(files, os.path.join(work, "conc"), conc_n)
    violations = seq["violations"] + conc["violations"]
    short = []
    if seq_n < 200:
        short.append(f"{seq_n} sequential jobs, not the issue's 200 (BENCH_TLS_JOBS=200)")
    if conc_n < 100:
        short.append(f"{conc_n} concurrent, not the issue's 100 (BENCH_TLS_CONCURRENT=100)")
    return [
        figure(f"TLS handshakes per job once warm, {seq_n} sequential jobs", seq["per_job"],
               "", goal="0",
               note="; ".join(short + [f"after the first {WARM} jobs; {seq['total']} "
                                        f"handshakes in all, {seq['requests_per_job']:.1f} "
                                        "requests per job"]) or None),
        figure(f"peak connections per host, {conc_n} concurrent jobs", conc["peak"], "",
               anchor="HTTP/1.1, 2 idle conns per host",
               note=f"{conc['running']} jobs seen running at once; HTTP/1.1 (the double has "
                    "no HTTP/2), so each request in flight needs its own connection"),
        figure(f"TLS handshakes per job, {conc_n} concurrent jobs", conc["handshakes"] / conc_n,
               ""),
        figure(f"connections kept open 1 s after {conc_n} concurrent jobs", conc["idle"], "",
               anchor="2 idle per host"),
        figure("new connection: TLS handshake, api/http.c's CA options", conn["runner"], "ms",
               goal="≤ 3 ms", limit=conn["alone"],
               limit_what="same handshake trusting the test CA alone",
               note=f"build/tools/conn_bench, {FRESH} fresh connections on one multi handle "
                    f"per process ({ROUNDS} processes); APPCONNECT - CONNECT"),
        figure("first connection: TLS handshake and CA store built (once per process)",
               conn["first"], "ms"),
        figure("new connection, the same bundle with libcurl's CAPATH left set",
               conn["capath"], "ms", anchor="~21 ms (Debian libcurl, CAPATH set)",
               note="without CURLOPT_CAPATH=NULL libcurl does not cache the CA store and "
                    "parses the whole bundle for every connection"),
        figure("new connection, `curl --cacert` (a process each)", conn["cli"], "ms"),
        figure("protocol violations seen by the double", len(violations), "", goal="0",
               note="; ".join(violations[:3]) or None),
    ]
