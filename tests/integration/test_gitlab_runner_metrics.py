"""The gitlab_runner_* series, scraped as a dashboard written for gitlab-runner
would: after a job that succeeds, one that fails and one that is canceled.
Each series' type, label names, label values and buckets are gitlab-runner's
(commands/multi.go, commands/builds_helper.go, helpers/prometheus,
network/api_requests_collector.go, common/version.go)."""
import re

from daemon_helpers import without_sources
from gitlab_double import job_payload
from test_daemon_observability import TOKEN, Daemon, free_port, get, get_or_none, wait

SHORT = "Observabi"  # glrt-t1_ObservabilityToken00 without its prefixes, 9 characters

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """{name: type}, [(name, {label: value}, value)] from the exposition text."""
    types, samples = {}, []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name not in types, f"two TYPE lines for {name}"
            types[name] = kind
        elif line and not line.startswith("#"):
            m = SAMPLE.match(line)
            assert m, f"not a sample line: {line!r}"
            labels = dict(LABEL.findall(m.group(2) or ""))
            # Label names in order, as the Go client writes them (le last).
            names = [n for n in labels if n != "le"]
            assert not m.group(1).startswith("gitlab_runner_") or names == sorted(names), line
            samples.append((m.group(1), labels, float(m.group(3))))
    return types, samples


def series(samples, name, **match):
    return [(labels, v) for n, labels, v in samples
            if n == name and all(labels.get(k) == w for k, w in match.items())]


def one(samples, name, **match):
    found = series(samples, name, **match)
    assert len(found) == 1, f"{name} {match}: {found}"
    return found[0]


def scrape(base):
    status, text = get(base + "/metrics")
    assert status == 200
    return parse(text)


def test_gitlab_runner_series(gitlab, tmp_path):
    port = free_port()
    r = gitlab.add_runner(token=TOKEN, id=76)
    d = Daemon(tmp_path, gitlab, extra_global=f'listen_address = "127.0.0.1:{port}"',
               extra_runner="limit = 3")
    base = f"http://127.0.0.1:{port}"
    try:
        wait(lambda: get_or_none(base + "/health/ready") == 200, what="/health/ready")
        sid = (tmp_path / ".runner_system_id").read_text().strip()
        me = {"runner": SHORT, "runner_name": "obs", "system_id": sid}

        # One failed answer: the runner logs it, and errors_total must count that line.
        gitlab.script("POST", r"/api/v4/jobs/request", times=1, status=500)
        ok = gitlab.add_job(job_payload(variables=without_sources(), script=["echo fine"]), runner=r)
        gitlab.wait_for_job(ok, timeout=20)
        bad = gitlab.add_job(job_payload(variables=without_sources(), script=["exit 1"]), runner=r)
        gitlab.wait_for_job(bad, timeout=20)
        slow = gitlab.add_job(job_payload(variables=without_sources(),
                                          script=["echo started",
                                                  "for i in $(seq 300); do echo tick; sleep 0.1; done"]),
                              runner=r)
        wait(lambda: "started" in slow.log_text, what="the slow job to start")

        # A job in its script (it prints, so that its PATCHes learn of the cancel): gitlab-runner's state, stage and shell executor stage.
        types, s = scrape(base)
        assert types["gitlab_runner_jobs"] == "gauge"
        labels, v = one(s, "gitlab_runner_jobs", state="running")
        assert labels == dict(me, state="running", stage="step_script", executor_stage="prepare")
        assert v == 1
        labels, v = one(s, "gitlab_runner_jobs", state="idle")
        assert labels == dict(me, state="idle", stage="idle", executor_stage="idle") and v == 0

        slow.cancel()
        gitlab.wait_for_job(slow, timeout=20)
        def settled():
            s = scrape(base)[1]
            count = series(s, "gitlab_runner_job_duration_seconds_count")
            return len(series(s, "gitlab_runner_jobs")) == 1 and count and count[0][1] == 3
        wait(settled, what="the three jobs over and gone from gitlab_runner_jobs")
        types, s = scrape(base)
        stderr = (tmp_path / "stderr").read_text()
    finally:
        d.stop()
    assert ok.status == "success" and bad.status == "failed" and slow.status == "canceled"

    expect_types = {
        "gitlab_runner_version_info": "gauge",
        "gitlab_runner_concurrent": "gauge",
        "gitlab_runner_limit": "gauge",
        "gitlab_runner_jobs": "gauge",
        "gitlab_runner_jobs_total": "counter",
        "gitlab_runner_job_duration_seconds": "histogram",
        "gitlab_runner_job_queue_duration_seconds": "histogram",
        "gitlab_runner_job_queue_size": "gauge",
        "gitlab_runner_job_queue_depth": "gauge",
        "gitlab_runner_acceptable_job_queuing_duration_exceeded_total": "counter",
        "gitlab_runner_job_execution_mode_total": "counter",
        "gitlab_runner_failed_jobs_total": "counter",
        "gitlab_runner_api_request_statuses_total": "counter",
        "gitlab_runner_api_request_duration_seconds": "histogram",
        "gitlab_runner_api_request_retries_total": "counter",
        "gitlab_runner_errors_total": "counter",
        "gitlab_runner_request_concurrency": "gauge",
        "gitlab_runner_request_concurrency_exceeded_total": "counter",
        "gitlab_runner_request_concurrency_hard_limit": "gauge",
        "gitlab_runner_request_concurrency_adaptive_limit": "gauge",
        "gitlab_runner_request_concurrency_used_limit": "gauge",
        "gitlab_runner_configuration_loaded_total": "counter",
        "gitlab_runner_configuration_loading_error_total": "counter",
        "gitlab_runner_configuration_saved_total": "counter",
        "gitlab_runner_configuration_saving_error_total": "counter",
        "gitlab_runner_process_state_info": "gauge",
    }
    for name, kind in expect_types.items():
        assert types.get(name) == kind, f"{name}: {types.get(name)}"
    # The runner_* series are still there.
    assert types["runner_jobs_finished_total"] == "counter"

    labels, v = one(s, "gitlab_runner_version_info")
    assert set(labels) == {"name", "version", "revision", "branch", "go_version", "built_at",
                           "os", "architecture"} and v == 1
    assert labels["os"] == "linux"
    assert one(s, "gitlab_runner_concurrent") == ({}, 2)
    assert one(s, "gitlab_runner_limit") == (me, 3)

    # Only the idle series is left once the jobs are over.
    assert series(s, "gitlab_runner_jobs") == [
        (dict(me, state="idle", stage="idle", executor_stage="idle"), 0)]
    assert one(s, "gitlab_runner_jobs_total") == (me, 3)

    mode = dict(me, mode="traditional")
    buckets = [(labels["le"], v) for labels, v in series(s, "gitlab_runner_job_duration_seconds_bucket")]
    assert [le for le, _ in buckets] == ["30", "60", "300", "600", "1800", "3600", "7200",
                                         "10800", "18000", "36000", "+Inf"]
    assert all(v == 3 for _, v in buckets)
    assert one(s, "gitlab_runner_job_duration_seconds_count") == (mode, 3)
    assert series(s, "gitlab_runner_job_duration_seconds_bucket", le="30")[0][0] == dict(mode, le="30")

    queue = [labels["le"] for labels, _ in series(s, "gitlab_runner_job_queue_duration_seconds_bucket")]
    assert queue == ["1", "3", "10", "30", "60", "120", "300", "900", "1800", "3600", "+Inf"]
    assert one(s, "gitlab_runner_job_queue_duration_seconds_count") == (
        dict(me, project_jobs_running="0"), 3)
    assert one(s, "gitlab_runner_job_queue_size") == (me, 0)
    assert one(s, "gitlab_runner_job_queue_depth") == (me, 0)
    assert one(s, "gitlab_runner_acceptable_job_queuing_duration_exceeded_total") == (me, 0)
    assert one(s, "gitlab_runner_job_execution_mode_total") == (
        {"executor": "shell", "mode": "traditional"}, 3)

    # The cause's own reason: job_canceled, though GitLab was told unknown_failure.
    failed = {labels["failure_reason"]: (labels, v)
              for labels, v in series(s, "gitlab_runner_failed_jobs_total")}
    who = {"runner": SHORT, "runner_name": "obs", "mode": "traditional"}
    assert failed == {"script_failure": (dict(who, failure_reason="script_failure"), 1),
                      "job_canceled": (dict(who, failure_reason="job_canceled"), 1)}

    api = {"runner": SHORT, "system_id": sid}
    statuses = series(s, "gitlab_runner_api_request_statuses_total")
    assert all(set(labels) == {"runner", "system_id", "endpoint", "status", "method"}
               for labels, _ in statuses)
    assert one(s, "gitlab_runner_api_request_statuses_total", endpoint="request_job",
               status="201") == (dict(api, endpoint="request_job", status="201", method="post"), 3)
    _, puts = one(s, "gitlab_runner_api_request_statuses_total", endpoint="update_job", status="200")
    assert puts >= 6  # each job: running, then its final state
    assert series(s, "gitlab_runner_api_request_statuses_total", endpoint="patch_trace",
                  status="202", method="patch")
    assert {labels["endpoint"] for labels, _ in statuses} <= {
        "request_job", "update_job", "patch_trace"}
    labels, n = one(s, "gitlab_runner_api_request_duration_seconds_count",
                    endpoint="request_job", status_class="2xx")
    assert labels == dict(api, endpoint="request_job", status_class="2xx", method="post")
    assert n >= 3
    assert [lb["le"] for lb, _ in series(s, "gitlab_runner_api_request_duration_seconds_bucket",
                                         endpoint="request_job", status_class="2xx")] == [
        "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "30", "60", "+Inf"]
    labels, attempts = one(s, "gitlab_runner_api_request_retries_total",
                           path="/api/v4/jobs/request")
    assert labels == {"path": "/api/v4/jobs/request", "method": "post"} and attempts >= 3
    assert series(s, "gitlab_runner_api_request_retries_total", path="/api/v4/jobs/{id}",
                  method="put")

    errors = {labels["level"]: v for labels, v in series(s, "gitlab_runner_errors_total")}
    assert set(errors) == {"warning", "error", "fatal", "panic"}
    assert errors["warning"] + errors["error"] >= 1, "the scripted 500 was logged"
    assert errors["warning"] == stderr.count("WARNING: ")
    assert errors["error"] == stderr.count("ERROR: ")
    assert errors["fatal"] == errors["panic"] == 0

    assert one(s, "gitlab_runner_request_concurrency")[0] == api
    assert one(s, "gitlab_runner_request_concurrency")[1] in (0, 1)
    assert one(s, "gitlab_runner_request_concurrency_exceeded_total") == (api, 0)
    assert one(s, "gitlab_runner_request_concurrency_hard_limit") == (api, 1)
    assert one(s, "gitlab_runner_request_concurrency_used_limit") == (api, 1)
    assert one(s, "gitlab_runner_request_concurrency_adaptive_limit") == (api, 0)

    assert one(s, "gitlab_runner_configuration_loaded_total") == ({}, 1)
    assert one(s, "gitlab_runner_configuration_loading_error_total") == ({}, 0)
    assert one(s, "gitlab_runner_process_state_info") == ({"state": "running"}, 1)
