"""Standalone mode: `python3 -m gitlab_double --port-file F [...]` (PYTHONPATH=<repo>/tests).

For `make demo` and for poking at the double by hand: it starts, writes
its URL to the port file (atomically, so a poller never reads half a
line), logs every request as one JSON line, and runs until SIGTERM or
SIGINT.  Violations are printed to stderr as they happen.

Pipelines (the demo): `--pipeline FILE.json` is a JSON list of job specs
(job_payload() arguments plus "id", "runner" and the Job options, see
GitLabDouble.add_job_spec), queued before the port file is written.
`--summary FILE` gets, once every queued job has a final status (and
again at SIGTERM/SIGINT), a JSON summary: {"complete", "jobs": [{id, name,
status, failure_reason, exit_code, log, bytesize, checksum, checksum_ok,
checksum_mismatch}], "violations", "errors"}.  `--exit-when-done` stops
the double once that first summary is written.
"""
import argparse
import base64
import json
import os
import signal
import sys
import threading

from . import certs
from .double import GitLabDouble


def _parse_runner(text):
    token, sep, rid = text.rpartition(":")
    if not sep or not token or not rid.isdigit():
        raise argparse.ArgumentTypeError(f"expected TOKEN:ID, got {text!r}")
    return token, int(rid)


def _parse_args(argv):
    ap = argparse.ArgumentParser(prog="python3 -m gitlab_double",
                                 description="Run the GitLab test double on 127.0.0.1.")
    ap.add_argument("--port-file", required=True, help="write the URL here once listening")
    ap.add_argument("--tls-dir", help="serve HTTPS with certificates in (or generated into) DIR")
    ap.add_argument("--require-client-cert", action="store_true")
    ap.add_argument("--runner", action="append", default=[], type=_parse_runner,
                    metavar="TOKEN:ID", help="a runner that exists GitLab-side")
    ap.add_argument("--registration-token", action="append", default=[], metavar="T")
    ap.add_argument("--pat", action="append", default=[], metavar="PAT",
                    help="a personal access token allowed to reset runner tokens")
    ap.add_argument("--router-url", help="answer router discovery with this server_url")
    ap.add_argument("--no-legacy-registration", action="store_true",
                    help="POST /runners answers 410")
    ap.add_argument("--requests-log", metavar="F.jsonl", help="append one JSON line per request")
    ap.add_argument("--long-poll", type=float, default=0.0, metavar="SECONDS",
                    help="hold job requests with a current last_update like Workhorse")
    ap.add_argument("--pipeline", metavar="FILE.json", help="job specs to queue at start")
    ap.add_argument("--summary", metavar="FILE.json",
                    help="write the pipeline summary here when every job is final")
    ap.add_argument("--exit-when-done", action="store_true",
                    help="stop once every pipeline job is final (after the summary)")
    return ap.parse_args(argv)


def load_pipeline(path):
    """The job specs of a --pipeline file (a JSON list of objects)."""
    with open(path, encoding="utf-8") as f:
        specs = json.load(f)
    if not isinstance(specs, list) or not all(isinstance(s, dict) for s in specs):
        raise SystemExit(f"{path}: expected a JSON list of job spec objects")
    return specs


def pipeline_summary(d, ids):
    """The summary document for the jobs of the pipeline (JSON-able)."""
    return {"complete": d.jobs_final(ids), "jobs": [d.job(i).report() for i in ids],
            "violations": d.violations, "errors": d.errors}


def write_json(path, obj):
    """Write atomically, so a poller never reads half a file."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def request_record(req):
    """A Request as a JSON-able dict (body as text when it is UTF-8, else base64)."""
    rec = {"method": req.method, "path": req.path, "query": req.query,
           "headers": req.headers.items(), "status": req.response_status,
           "connection": req.connection, "violations": req.violations}
    try:
        rec["body"] = req.body.decode("utf-8")
    except UnicodeDecodeError:
        rec["body_base64"] = base64.b64encode(req.body).decode("ascii")
    return rec


def main(argv=None):
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    tls = None
    if args.tls_dir:
        tls = certs.existing(args.tls_dir) or certs.generate(args.tls_dir)
    specs = load_pipeline(args.pipeline) if args.pipeline else []
    d = GitLabDouble(tls=tls, require_client_cert=args.require_client_cert,
                     long_poll=args.long_poll)
    for token, rid in args.runner:
        d.add_runner(token=token, id=rid)
    d.registration_tokens.update(args.registration_token)
    d.pats.update({p: True for p in args.pat})
    d.router_url = args.router_url
    d.legacy_registration_disabled = args.no_legacy_registration

    log_lock = threading.Lock()
    log = open(args.requests_log, "a", encoding="utf-8") if args.requests_log else None

    def on_request(req):
        for v in req.violations:
            print(f"gitlab-double: VIOLATION {v}", file=sys.stderr, flush=True)
        if log is not None:
            with log_lock:
                log.write(json.dumps(request_record(req)) + "\n")
                log.flush()

    d.listeners.append(on_request)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    d.start()
    try:
        ids = [d.add_job_spec(spec).id for spec in specs]
    except (TypeError, ValueError, KeyError) as e:
        d.stop()
        raise SystemExit(f"{args.pipeline}: bad job spec: {e}")
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(d.url + "\n")
    os.replace(tmp, args.port_file)
    print(f"gitlab-double: listening on {d.url}"
          + (f", {len(ids)} jobs queued" if ids else ""), file=sys.stderr, flush=True)
    done = False
    try:
        while not stop.wait(0.1):
            if ids and not done and d.jobs_final(ids):
                done = True
                if args.summary:
                    write_json(args.summary, pipeline_summary(d, ids))
                print("gitlab-double: every pipeline job is final", file=sys.stderr, flush=True)
                if args.exit_when_done:
                    break
    finally:
        d.stop()
        if args.summary and ids:
            write_json(args.summary, pipeline_summary(d, ids))
        if log is not None:
            log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
