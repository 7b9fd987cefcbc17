"""The daemon's log as gitlab-runner's logrus writes it: with --log-format json
the job id, the runner's short token and its name are keys of their own, not
part of msg; text puts them after msg as logfmt; the runner format keeps its
lines.  And `run`'s LISTEN_ADDRESS, --service and --syslog."""
import json
import re
import socket
import urllib.request

from daemon_helpers import (add_job, check_run, daemons, entry, new_token,  # noqa: F401
                            wait_until, without_sources)


def records(text):
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def test_json_lines_have_job_and_runner_keys(gitlab, daemons):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")])
    job = add_job(gitlab, r, variables=without_sources(), script=["echo hi"])
    d.start(args=["--log-format", "json", "run", "-c", d.config, "-d", d.dir])
    gitlab.wait_for_job(job, "success", timeout=20)
    d.wait_log(r'"msg":"finished, succeeded; GitLab has the report"')
    assert d.stop() == 0
    recs = records(d.stderr)
    short = r.token[len("glrt-t1_"):][:9]
    polling = [x for x in recs if x["msg"].startswith("polling ")]
    assert polling and polling[0]["runner"] == short and polling[0]["runner_name"] == "alpha"
    assert "alpha" not in polling[0]["msg"] and short not in polling[0]["msg"]
    done = [x for x in recs if x["msg"].startswith("finished, ")]
    assert done and done[0]["job"] == job.id and isinstance(done[0]["job"], int)
    assert done[0]["level"] == "info" and "time" in done[0]
    assert f"job {job.id}" not in done[0]["msg"]
    # Keys in logrus's (encoding/json's) order: sorted.
    line = next(ln for ln in d.stderr.splitlines() if '"msg":"finished, ' in ln)
    assert list(json.loads(line)) == sorted(json.loads(line))
    check_run(gitlab, d, [job])


def test_text_lines_have_logfmt_fields(gitlab, daemons):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")])
    job = add_job(gitlab, r, variables=without_sources(), script=["echo hi"])
    d.start(args=["--log-format", "text", "run", "-c", d.config, "-d", d.dir])
    gitlab.wait_for_job(job, "success", timeout=20)
    d.wait_log(rf'msg="finished, succeeded; GitLab has the report" job={job.id}\n')
    d.wait_log(r'msg="polling [^"]*" runner=\S+ runner_name=alpha\n')
    assert d.stop() == 0
    check_run(gitlab, d, [job])


def test_runner_format_keeps_its_lines(gitlab, daemons):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")])
    job = add_job(gitlab, r, variables=without_sources(), script=["echo hi"])
    d.start()
    gitlab.wait_for_job(job, "success", timeout=20)
    d.wait_log(rf"(?m)^job {job.id}: finished, succeeded; GitLab has the report$")
    d.wait_log(r"(?m)^runner alpha \(\w+\): polling ")
    assert d.stop() == 0
    check_run(gitlab, d, [job])


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_listen_address_from_the_environment(gitlab, daemons):
    # multi.go: ListenAddress `env:"LISTEN_ADDRESS"`, over the config's listen_address.
    r = gitlab.add_runner(token=new_token())
    port = _free_port()
    d = daemons(gitlab, [entry(gitlab, r, "alpha")], env={"LISTEN_ADDRESS": f"127.0.0.1:{port}"})
    d.start()
    d.wait_log(rf"metrics and health on 127.0.0.1:{port}")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        assert resp.status == 200
    assert d.stop() == 0


def test_syslog_and_service_are_taken_not_ignored(gitlab, daemons):
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "alpha")])
    d.start(args=["run", "-c", d.config, "-d", d.dir, "--syslog", "-n", "my-runner"])
    d.wait_log(r"runner alpha \(\w+\): polling ")
    assert d.stop() == 0
    # LOG_SYSLOG is read as gitlab-runner reads it: a bool, or an error.
    d.env["LOG_SYSLOG"] = "perhaps"
    d.start()
    assert d.wait(10) == 2
    assert '$LOG_SYSLOG: "perhaps" is not true or false' in d.stderr
