"""The local cache end to end (protocol.md 7.5).

A job's cache is archived into <cache_dir>/<project>/<key>/cache.zip and
the next job restores it; fallback keys and CACHE_FALLBACK_KEY are tried
in order, policies pull and push do half the work, `when` picks the
archive stage, and every cache failure is a warning, never a failed job.
An interrupted archiver leaves the old cache as it was.
"""
import os
import signal
import subprocess
import time
import zipfile

from daemon_helpers import RUNNER, daemons, run_one  # noqa: F401

VENDOR = ["mkdir -p vendor/deep", "echo cached > vendor/deep/lib.txt",
          "chmod 600 vendor/deep/lib.txt"]
SHOW = ["if [ -f vendor/deep/lib.txt ]; then echo \"RESTORED $(cat vendor/deep/lib.txt) "
        "$(stat -c %a vendor/deep/lib.txt)\"; else echo NOTHING-RESTORED; fi"]


def run(gitlab, daemons, tmp_path, cache_dir, label, **payload):
    return run_one(gitlab, daemons, tmp_path / label,
                   entry_keys={"cache_dir": str(cache_dir)}, **payload)


def test_a_cache_saved_by_one_job_is_restored_by_the_next(gitlab, daemons, tmp_path):
    cache_dir = tmp_path / "cache"
    first = run(gitlab, daemons, tmp_path, cache_dir, "a", name="deps", script=VENDOR + SHOW,
                cache=[{"key": "deps-$CI_COMMIT_REF_NAME", "paths": ["vendor/"]}])
    log = first.log_text
    assert first.status == "success", log
    assert "NOTHING-RESTORED" in log
    assert "Checking cache for deps-main..." in log
    assert "Failed to extract cache" in log      # none yet: a warning, not a failure
    assert "Creating cache deps-main..." in log and "Created cache" in log
    archive = cache_dir / "group" / "project" / "deps-main" / "cache.zip"
    assert archive.is_file()
    assert "vendor/deep/lib.txt" in zipfile.ZipFile(archive).namelist()
    assert not [p for p in archive.parent.iterdir() if p.name != "cache.zip"], \
        "a temporary file was left beside the cache"

    second = run(gitlab, daemons, tmp_path, cache_dir, "b", name="deps", script=SHOW,
                 cache=[{"key": "deps-$CI_COMMIT_REF_NAME", "paths": ["vendor/"],
                         "policy": "pull"}])
    log = second.log_text
    assert second.status == "success", log
    assert "Successfully extracted cache" in log
    assert "RESTORED cached 600" in log
    assert "Not uploading cache deps-main due to policy" in log

    # pull-push, nothing changed: the cache is not written again.
    before = archive.stat()
    third = run(gitlab, daemons, tmp_path, cache_dir, "c", name="deps", script=SHOW,
                cache=[{"key": "deps-$CI_COMMIT_REF_NAME", "paths": ["vendor/"]}])
    assert "RESTORED cached 600" in third.log_text, third.log_text
    assert "Archive is up to date!" in third.log_text
    after = archive.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    # A changed file: written again.
    fourth = run(gitlab, daemons, tmp_path, cache_dir, "d", name="deps",
                 script=SHOW + ["echo new > vendor/deep/lib.txt"],
                 cache=[{"key": "deps-$CI_COMMIT_REF_NAME", "paths": ["vendor/"]}])
    assert "Archive is up to date!" not in fourth.log_text, fourth.log_text
    assert archive.stat().st_ino != before.st_ino


def test_default_key_fallback_keys_and_cache_fallback_key(gitlab, daemons, tmp_path):
    cache_dir = tmp_path / "cache"
    # No key: gitlab-runner's default, <job name>/<ref>.
    seed = run(gitlab, daemons, tmp_path, cache_dir, "seed", name="seed", script=VENDOR,
               cache=[{"paths": ["vendor/"], "policy": "push"}])
    assert seed.status == "success", seed.log_text
    assert "Checking cache" not in seed.log_text       # push: no restore
    assert (cache_dir / "group/project/seed/main/cache.zip").is_file()

    fb = run(gitlab, daemons, tmp_path, cache_dir, "fb", name="fb", script=SHOW,
             cache=[{"key": "missing", "paths": ["vendor/"], "policy": "pull",
                     "fallback_keys": ["also-missing", "seed/$CI_COMMIT_REF_NAME"]}])
    log = fb.log_text
    assert fb.status == "success", log
    order = [log.index(f"Checking cache for {k}...") for k in
             ("missing", "also-missing", "seed/main")]
    assert order == sorted(order), log
    assert "RESTORED cached" in log

    var = run(gitlab, daemons, tmp_path, cache_dir, "var", name="var", script=SHOW,
              variables={"CACHE_FALLBACK_KEY": "seed/main"},
              cache=[{"key": "nope", "paths": ["vendor/"], "policy": "pull"}])
    assert "RESTORED cached" in var.log_text, var.log_text


def test_cache_paths_keys_and_fallback_keys_are_expanded(gitlab, daemons, tmp_path):
    """gitlab-runner's cache-archiver expands its --path arguments; keys and fallback keys
    are expanded with the job's variables too."""
    cache_dir = tmp_path / "cache"
    variables = {"VENDOR_DIR": "vendor", "FLAVOUR": "ruby"}
    seed = run(gitlab, daemons, tmp_path, cache_dir, "seed", name="seed", script=VENDOR,
               variables=variables,
               cache=[{"key": "deps-$FLAVOUR", "paths": ["$VENDOR_DIR/", "${UNSET}"],
                       "policy": "push"}])
    log = seed.log_text
    assert seed.status == "success", log
    archive = cache_dir / "group" / "project" / "deps-ruby" / "cache.zip"
    assert archive.is_file(), log
    assert "vendor/deep/lib.txt" in zipfile.ZipFile(archive).namelist()

    use = run(gitlab, daemons, tmp_path, cache_dir, "use", name="use", script=SHOW,
              variables=variables,
              cache=[{"key": "none-$FLAVOUR", "paths": ["${VENDOR_DIR}/"], "policy": "pull",
                      "fallback_keys": ["deps-${FLAVOUR}"]}])
    log = use.log_text
    assert use.status == "success", log
    assert "Checking cache for none-ruby..." in log
    assert "Checking cache for deps-ruby..." in log
    assert "RESTORED cached" in log


def test_keys_that_would_leave_the_cache_dir_are_sanitised(gitlab, daemons, tmp_path):
    cache_dir = tmp_path / "cache"
    job = run(gitlab, daemons, tmp_path, cache_dir, "a", script=VENDOR,
              cache=[{"key": "../../../escape", "paths": ["vendor/"]},
                     {"key": "%2e%2e", "paths": ["vendor/"]}])
    log = job.log_text
    assert job.status == "success", log
    assert 'cache key "../../../escape" sanitized to "escape"' in log
    assert "Skipping cache extraction due to empty cache key" in log
    assert (cache_dir / "group/project/escape/cache.zip").is_file()
    assert not (tmp_path / "escape").exists()


def test_when_on_failure_and_a_broken_cache_is_only_a_warning(gitlab, daemons, tmp_path):
    cache_dir = tmp_path / "cache"
    broken = cache_dir / "group/project/broken/cache.zip"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"PK\x03\x04 this is not a zip")
    job = run(gitlab, daemons, tmp_path, cache_dir, "a", script=VENDOR + ["exit 1"],
              cache=[{"key": "broken", "paths": ["vendor/"], "when": "on_success"},
                     {"key": "failed", "paths": ["vendor/"], "when": "on_failure"}])
    log = job.log_text
    assert job.status == "failed" and job.exit_code == 1, log
    assert job.failure_reason == "script_failure"
    assert "Failed to extract cache" in log
    assert "Creating cache failed..." in log
    assert "Creating cache broken..." not in log
    assert (cache_dir / "group/project/failed/cache.zip").is_file()


def test_no_files_to_cache_is_a_warning(gitlab, daemons, tmp_path):
    job = run(gitlab, daemons, tmp_path, tmp_path / "cache", "a", script=["true"],
              cache=[{"key": "k", "paths": ["not-there/"]}])
    assert job.status == "success", job.log_text
    assert "No files to cache." in job.log_text
    assert not (tmp_path / "cache/group/project/k/cache.zip").exists()


def test_an_interrupted_archiver_leaves_the_old_cache(tmp_path):
    project = tmp_path / "project"
    (project / "vendor").mkdir(parents=True)
    (project / "vendor" / "small.txt").write_text("old\n")
    cache = tmp_path / "cache" / "k" / "cache.zip"
    args = [RUNNER, "cache-archiver", "--file", str(cache), "--path", "vendor"]
    subprocess.run(args, cwd=project, check=True, capture_output=True)
    old = cache.read_bytes()

    with open(project / "vendor" / "big.bin", "wb") as f:
        for _ in range(64):
            f.write(os.urandom(1 << 20))
    p = subprocess.Popen(args, cwd=project, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert cache.read_bytes() == old, "a killed archiver replaced the cache"

    out = project.parent / "restored"
    out.mkdir()
    subprocess.run([RUNNER, "cache-extractor", "--file", str(cache)], cwd=out, check=True,
                   capture_output=True)
    assert (out / "vendor" / "small.txt").read_text() == "old\n"
    assert not (out / "vendor" / "big.bin").exists()


def run_measured(args, cwd):
    """Run a helper; its peak RSS in KiB (VmHWM, read while it runs).

    Not wait4's ru_maxrss: that counts the memory of the forked Python
    child before exec, so it reports pytest's size, not the helper's.
    """
    p = subprocess.Popen(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.05)
    err = p.stderr.read()
    assert p.returncode == 0, err.decode(errors="replace")
    assert peak > 0, "the helper ended before its memory could be read"
    return peak


def test_a_5_gib_sparse_file_round_trips_with_flat_memory(tmp_path):
    """ZIP64: an entry over 4 GiB; the helpers' RSS stays small whatever the size."""
    project = tmp_path / "project"
    (project / "big").mkdir(parents=True)
    size = 5 << 30
    with open(project / "big" / "sparse.bin", "wb") as f:
        f.truncate(size)
        f.seek(size - 6)
        f.write(b"theend")
    cache = tmp_path / "cache" / "cache.zip"
    archived_rss = run_measured([RUNNER, "cache-archiver", "--file", str(cache),
                                 "--path", "big"], project)
    info = zipfile.ZipFile(cache).getinfo("big/sparse.bin")
    assert info.file_size == size

    out = tmp_path / "out"
    out.mkdir()
    rss = run_measured([RUNNER, "cache-extractor", "--file", str(cache)], out)
    got = out / "big" / "sparse.bin"
    assert got.stat().st_size == size
    with open(got, "rb") as f:
        f.seek(size - 6)
        assert f.read() == b"theend"
    # ru_maxrss is in KiB: a whole-file buffer would be 5 GiB.
    assert archived_rss < 64 * 1024 and rss < 64 * 1024, (archived_rss, rss)
