"""Artifacts end to end: the job script's helpers against the double (protocol.md 7.1, 7.2).

A job uploads what its `artifacts:` name, as multipart with Job-Token; a
later job downloads it as a dependency and finds the same files, modes
and mtimes.  Retries and redirects send the very same bytes, 413 fails the
job at once, a download never hands the token to object storage, and a
hostile archive is refused without leaving anything behind.
"""
import gzip
import io
import os
import re
import stat
import subprocess
import threading
import time
import zipfile
import zlib

from daemon_helpers import RUNNER, check_run, daemons, run_one, wait_until  # noqa: F401

UPLOAD = r"/jobs/\d+/artifacts$"
MTIME = 1500000000        # 2017-07-14: kept by the round trip


def project_dir(tmp_path):
    """The project directory run_one's runner uses (short token varies: glob it)."""
    found = list((tmp_path / "builds").glob("*/0/group/project"))
    assert len(found) == 1, found
    return found[0]


def make_outputs():
    return [
        "mkdir -p out/sub out/empty",
        "printf 'binary\\n' > out/tool && chmod 755 out/tool",
        "printf 'data\\n' > out/sub/data.txt && chmod 640 out/sub/data.txt",
        "printf 'object\\n' > out/sub/x.o",
        "ln -s sub/data.txt out/link",
        f"touch -h -d @{MTIME} out/tool out/sub/data.txt out/link",
        "printf 'junk\\n' > notwanted.txt",
    ]


def zip_names(data):
    return sorted(zipfile.ZipFile(io.BytesIO(data)).namelist())


def test_upload_then_a_later_job_downloads_the_same_files(gitlab, daemons, tmp_path):
    build = run_one(gitlab, daemons, tmp_path / "a", name="build", script=make_outputs(),
                    artifacts=[{"name": "bin", "paths": ["out/"], "exclude": ["out/**/*.o"],
                                "when": "on_success", "artifact_type": "archive",
                                "artifact_format": "zip", "expire_in": "1 week"}])
    log = build.log_text
    assert build.status == "success", log
    assert "Uploading artifacts..." in log
    assert 'Uploading artifacts as "archive" to coordinator... 201 Created' in log
    assert re.search(r"bin\.zip: 6 files and directories, [0-9.]+ (B|KiB) to send", log), log
    assert re.search(r"Uploaded [0-9.]+ (B|KiB) in [0-9.]+ s \([0-9.]+ (B|KiB|MiB)/s\)", log), log
    ups = gitlab.artifact_uploads(build)
    assert len(ups) == 1 and ups[0].status == 201
    up = ups[0]
    assert up.headers.get("Job-Token") == build.token
    assert "Private-Token" not in up.headers and build.token not in up.request.target
    assert up.query == [("artifact_format", "zip"), ("artifact_type", "archive"),
                        ("expire_in", "1 week")]
    art = gitlab.artifact(build)
    assert art.filename == "bin.zip" and art.expire_in == "1 week"
    assert zip_names(art.data) == ["out/", "out/empty/", "out/link", "out/sub/",
                                   "out/sub/data.txt", "out/tool"]

    deps = [gitlab.artifact_dependency(build)]
    use = run_one(gitlab, daemons, tmp_path / "b", name="use", dependencies=deps,
                  script=["cd out", "stat -c 'STAT %n %a %Y %F' tool sub/data.txt link",
                          "readlink link", "cat sub/data.txt", "test -d empty"])
    log = use.log_text
    assert use.status == "success", log
    assert "Downloading artifacts for build (%d)..." % build.id in log
    assert "Downloading artifacts from coordinator... ok" in log
    assert re.search(r"Downloaded [0-9.]+ (B|KiB) in [0-9.]+ s", log), log
    assert f"STAT tool 755 {MTIME} regular file" in log
    assert f"STAT sub/data.txt 640 {MTIME} regular file" in log
    assert "STAT link 777" in log and "symbolic link" in log
    assert "sub/data.txt\n" in log.replace("\r", "")
    # The download asked for a direct download and was sent to storage,
    # which got no token of any kind.
    gets = gitlab.artifact_downloads(build)
    assert gets and "direct_download=true" in gets[0].query
    storage = gitlab.storage_requests()
    assert storage, "the 302 to object storage was not followed"
    for req in storage:
        for h in ("Job-Token", "Private-Token", "Authorization", "Runner-Token"):
            assert h not in req.headers
    assert not gitlab.violations


def test_artifact_paths_excludes_and_name_are_expanded(gitlab, daemons, tmp_path):
    """gitlab-runner's artifacts-uploader expands --path, --exclude and --name."""
    build = run_one(gitlab, daemons, tmp_path, name="build", script=make_outputs(),
                    variables={"OUT_DIR": "out", "SKIP": "*.o", "FLAVOUR": "linux"},
                    artifacts=[{"name": "bin-$FLAVOUR", "paths": ["$OUT_DIR/"],
                                "exclude": ["${OUT_DIR}/**/$SKIP"], "when": "on_success",
                                "artifact_type": "archive", "artifact_format": "zip"}])
    log = build.log_text
    assert build.status == "success", log
    art = gitlab.artifact(build)
    assert art.filename == "bin-linux.zip", log
    assert zip_names(art.data) == ["out/", "out/empty/", "out/link", "out/sub/",
                                   "out/sub/data.txt", "out/tool"]


def test_503_twice_then_201_sends_identical_bodies(gitlab, daemons, tmp_path):
    gitlab.script("POST", UPLOAD, times=2, status=503)
    job = run_one(gitlab, daemons, tmp_path, script=["echo payload > f.txt"],
                  artifacts=[{"paths": ["f.txt"]}])
    assert job.status == "success", job.log_text
    ups = gitlab.artifact_uploads(job)
    assert [u.status for u in ups] == [503, 503, 201]
    assert len({u.body_sha256 for u in ups}) == 1, "a retry sent different bytes"
    assert len({u.boundary for u in ups}) == 1
    assert all(u.complete and u.body_size > 0 for u in ups)


def test_a_dropped_connection_mid_body_is_retried_with_the_same_bytes(gitlab, daemons,
                                                                       tmp_path):
    gitlab.script("POST", UPLOAD, times=1, action="drop_mid_body")
    job = run_one(gitlab, daemons, tmp_path,
                  script=["head -c 300000 /dev/urandom > r.bin"],
                  artifacts=[{"paths": ["r.bin"]}])
    assert job.status == "success", job.log_text
    ups = gitlab.artifact_uploads(job)
    assert len(ups) == 2 and ups[0].status is None and ups[1].status == 201
    full = ups[1]
    assert full.complete
    stored = gitlab.artifact(job)
    assert zip_names(stored.data) == ["r.bin"]


def test_413_fails_the_job_at_once(gitlab, daemons, tmp_path):
    gitlab.max_artifact_size = 100
    job = run_one(gitlab, daemons, tmp_path,
                  script=["head -c 100000 /dev/urandom > big.bin"],
                  artifacts=[{"paths": ["big.bin"]}])
    log = job.log_text
    assert job.status == "failed", log
    assert job.failure_reason == "script_failure"
    assert len(gitlab.artifact_uploads(job)) == 1, "a 413 was retried"
    assert "too large" in log and "413" in log


def test_a_307_redirect_sends_the_whole_body_again(gitlab, daemons, tmp_path):
    gitlab.artifact_redirect = True
    job = run_one(gitlab, daemons, tmp_path, script=["seq 1 20000 > n.txt"],
                  artifacts=[{"paths": ["n.txt"]}])
    assert job.status == "success", job.log_text
    ups = gitlab.artifact_uploads(job)
    assert [(u.redirected, u.status) for u in ups] == [(False, 307), (True, 201)]
    assert ups[0].body_sha256 == ups[1].body_sha256
    # The double's own origin: the job token goes along (test_redirects.py has the rest).
    assert ups[1].request.headers.get("Job-Token") == job.token


def test_reports_in_gzip_and_raw(gitlab, daemons, tmp_path):
    job = run_one(gitlab, daemons, tmp_path,
                  script=["mkdir -p r", "echo '<testsuite/>' > r/junit.xml",
                          "echo '<more/>' > r/more.xml", "echo '{}' > sast.json", "exit 3"],
                  artifacts=[{"paths": ["r/*.xml"], "when": "always", "artifact_type": "junit",
                              "artifact_format": "gzip"},
                             {"paths": ["sast.json"], "when": "on_failure",
                              "artifact_type": "sast", "artifact_format": "raw"},
                             {"paths": ["r/"], "when": "on_success"}])
    assert job.status == "failed", job.log_text
    arts = gitlab.artifacts(job)
    assert sorted(arts) == ["junit", "sast"], "on_success artifacts of a failed job"
    junit = arts["junit"]
    assert junit.filename == "artifacts.gz"   # no name given: gitlab-runner's default
    # Concatenated members, one per file, each named for its file.
    assert gzip.decompress(junit.data) == b"<testsuite/>\n<more/>\n"
    names = []
    data = junit.data
    while data:
        flags = data[3]
        assert data[:2] == b"\x1f\x8b" and flags & 0x08, "no file name in the member"
        end = data.index(b"\0", 10)
        names.append(data[10:end].decode())
        dec = zlib.decompressobj(16 + zlib.MAX_WBITS)
        dec.decompress(data)
        data = dec.unused_data
    assert names == ["junit.xml", "more.xml"]
    assert arts["sast"].data == b"{}\n" and arts["sast"].filename == "artifacts"


def test_untracked_and_no_files(gitlab, daemons, tmp_path):
    job = run_one(gitlab, daemons, tmp_path,
                  script=["git init -q .", "echo t > tracked && git add tracked",
                          "printf '*.log\\n' > .gitignore", "git add .gitignore",
                          "echo u > untracked.txt", "echo l > build.log"],
                  artifacts=[{"untracked": True, "exclude": ["*.log"]},
                             {"paths": ["nothing-*"], "artifact_type": "junit",
                              "artifact_format": "gzip"}])
    log = job.log_text
    assert job.status == "success", log
    assert zip_names(gitlab.artifact(job).data) == ["untracked.txt"]
    assert "nothing-*: no matching files" in log
    assert "No files to upload" in log
    assert "junit" not in gitlab.artifacts(job)


def test_the_token_never_reaches_a_command_line(gitlab, daemons, tmp_path):
    # Hold the upload's answer so the helper is surely running while we look.
    gitlab.script("POST", UPLOAD, times=1, delay=2.0)
    seen, stop = [], threading.Event()

    def scan():
        while not stop.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        seen.append(f.read())
                except OSError:
                    pass
            time.sleep(0.05)

    t = threading.Thread(target=scan)
    t.start()
    try:
        job = run_one(gitlab, daemons, tmp_path, script=["echo x > a.txt"],
                      artifacts=[{"paths": ["a.txt"]}])
    finally:
        stop.set()
        t.join()
    assert job.status == "success", job.log_text
    helpers = [c for c in seen if b"artifacts-uploader" in c]
    assert helpers, "the uploader was never seen running"
    assert not [c for c in seen if job.token.encode() in c]


def hostile(entries):
    """A zip from (name, data, mode) triples; mode with S_IFLNK makes a symlink."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.create_system = 3
            info.external_attr = mode << 16
            z.writestr(info, data)
    return buf.getvalue()


HOSTILE = {
    "zip-slip": ([("ok.txt", b"ok", 0o100644), ("../escaped.txt", b"x", 0o100644)],
                 "../escaped.txt"),
    "absolute": ([("ok.txt", b"ok", 0o100644), ("/tmp/abs-escaped.txt", b"x", 0o100644)],
                 "/tmp/abs-escaped.txt"),
    "symlink": ([("ok.txt", b"ok", 0o100644), ("up", b"../../../..", 0o120777),
                 ("up/escaped.txt", b"x", 0o100644)], "up"),
    "symlink-alone": ([("ok.txt", b"ok", 0o100644), ("etc", b"/etc", 0o120777)], "etc"),
    "symlink-relative": ([("ok.txt", b"ok", 0o100644), ("d/l", b"../../x", 0o120777)],
                         "d/l"),
}


def test_hostile_archives_are_refused_and_leave_nothing(gitlab, daemons, tmp_path):
    for label, (entries, entry_name) in sorted(HOSTILE.items()):
        base = tmp_path / label
        evil = run_one(gitlab, daemons, base / "src", name=f"evil-{label}",
                       script=["true"])
        gitlab.add_artifact(evil, hostile(entries))
        job = run_one(gitlab, daemons, base / "dst", name=f"victim-{label}",
                      dependencies=[gitlab.artifact_dependency(evil)], script=["true"])
        log = job.log_text
        assert job.status == "failed", (label, log)
        assert entry_name in log, (label, log)
        project = project_dir(base / "dst")
        assert not (project / "ok.txt").exists(), f"{label}: partial extraction"
        assert not (project.parent / "escaped.txt").exists()
        assert not os.path.exists("/tmp/abs-escaped.txt")


def test_a_truncated_archive_fails_cleanly(gitlab, daemons, tmp_path):
    evil = run_one(gitlab, daemons, tmp_path / "src", name="cut", script=["true"])
    whole = hostile([(f"f{i}.txt", os.urandom(4000), 0o100644) for i in range(20)])
    gitlab.add_artifact(evil, whole[: len(whole) // 2])
    job = run_one(gitlab, daemons, tmp_path / "dst", name="victim",
                  dependencies=[gitlab.artifact_dependency(evil)], script=["true"])
    assert job.status == "failed", job.log_text
    project = project_dir(tmp_path / "dst")
    assert not any(p.name.startswith("f") for p in project.iterdir())


def test_a_zip_bomb_is_bounded(gitlab, daemons, tmp_path):
    evil = run_one(gitlab, daemons, tmp_path / "src", name="bomb", script=["true"])
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("zeros.bin", b"\0" * (20 << 20))
    gitlab.add_artifact(evil, buf.getvalue())
    job = run_one(gitlab, daemons, tmp_path / "dst", name="victim",
                  dependencies=[gitlab.artifact_dependency(evil)], script=["true"],
                  variables={"ARTIFACT_EXTRACT_MAX_BYTES": str(1 << 20)})
    assert job.status == "failed", job.log_text
    assert "zeros.bin" in job.log_text
    assert not (project_dir(tmp_path / "dst") / "zeros.bin").exists()
    assert stat.S_ISDIR(os.stat(project_dir(tmp_path / "dst")).st_mode)


def helper(args, cwd, env=None):
    full = dict(os.environ)
    full.pop("CI_JOB_TOKEN", None)
    full.update(env or {})
    return subprocess.run([RUNNER] + args, cwd=cwd, env=full, capture_output=True, text=True)


def test_helpers_refuse_a_token_on_the_command_line_and_bad_flags(tmp_path):
    for cmd in ("artifacts-uploader", "artifacts-downloader"):
        r = helper([cmd, "--url", "http://127.0.0.1:9", "--id", "1", "--token", "secret"],
                   tmp_path)
        assert r.returncode == 2, r
        assert "--token is not accepted" in r.stderr and "CI_JOB_TOKEN" in r.stderr
        r = helper([cmd, "--url", "http://127.0.0.1:9", "--id", "1"], tmp_path)
        assert r.returncode == 1 and "CI_JOB_TOKEN is not set" in r.stderr, r
    r = helper(["artifacts-uploader", "--url", "http://127.0.0.1:9", "--id", "1",
                "--artifact-format", "rar", "--path", "x"], tmp_path, {"CI_JOB_TOKEN": "t"})
    assert r.returncode == 2 and '"rar" is not zip, gzip or raw' in r.stderr, r
    r = helper(["artifacts-uploader", "--url", "http://127.0.0.1:9", "--id", "1",
                "--timeout", "soon"], tmp_path, {"CI_JOB_TOKEN": "t"})
    assert r.returncode == 2 and '--timeout: "soon" is not a duration' in r.stderr, r
    r = helper(["cache-extractor"], tmp_path)
    assert r.returncode == 2 and "Missing --file" in r.stderr, r


def test_403_is_not_retried_and_says_why(gitlab, daemons, tmp_path):
    gitlab.script("POST", UPLOAD, times=1, status=403)
    job = run_one(gitlab, daemons, tmp_path, script=["echo x > a.txt"],
                  artifacts=[{"paths": ["a.txt"]}])
    assert job.status == "failed", job.log_text
    assert len(gitlab.artifact_uploads(job)) == 1
    assert "GitLab refused the job token" in job.log_text


def test_a_dependencys_own_token_is_masked_even_in_a_debug_trace(gitlab, daemons, tmp_path):
    from daemon_helpers import add_job, entry, new_token
    # An old-style token: no glcbt- prefix for the prefix masking to catch.
    legacy = "Zq7" + "x4RtT9kLmN2pQ8vW"
    build = gitlab.add_job({"job_info": {"name": "build"}}, token=legacy, status="success")
    gitlab.add_artifact(build, hostile([("out/x", b"x\n", 0o100644)]))
    r = gitlab.add_runner(token=new_token())
    d = daemons(gitlab, [entry(gitlab, r, "one", builds_dir=str(tmp_path / "builds"))])
    job = add_job(gitlab, r, name="use", dependencies=[gitlab.artifact_dependency(build)],
                  script=["cat out/x"], variables={"CI_DEBUG_TRACE": "true"})
    # add_job hands the new job's token to its dependencies, as GitLab does
    # by default; GitLab without that flag sends the dependency's own token.
    job.payload["dependencies"][0]["token"] = legacy
    d.start()
    gitlab.wait_for_job(job, ("success", "failed"), timeout=60)
    assert d.stop() == 0
    log = job.log_text
    assert job.status == "success", log
    assert "CI_JOB_TOKEN=[MASKED]" in log.replace("'", ""), log
    assert legacy not in log
    assert gitlab.artifact_downloads(build)[-1].headers.get("Job-Token") == legacy
