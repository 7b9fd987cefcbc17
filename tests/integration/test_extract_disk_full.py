"""Extraction onto a file system that cannot take the archive (issue 14).

The project directory is a small tmpfs.  An archive that fills it half-way
(many small files: each takes a whole page, more than the sizes it
declares), one whose central directory declares 10 GiB, and one whose
header lies about a size that inflates far past it all fail with exit 1
and one line naming the file and the cause, and the project directory
holds nothing new afterwards: no file, no staging directory, no byte used.
Both helpers are driven: cache-extractor and artifacts-downloader.
"""
import ctypes
import os
import re
import struct
import subprocess
import zipfile
import zlib

import pytest

from daemon_helpers import RUNNER, daemons, run_one  # noqa: F401

GIB = 1 << 30
MIB = 1 << 20


@pytest.fixture
def small_fs(tmp_path):
    """A 2 MiB tmpfs holding one file of the project's own; unmounted afterwards."""
    mnt = tmp_path / "project"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "tmpfs", str(mnt)],
                   check=True)
    try:
        (mnt / "keep.txt").write_text("the project's own\n")
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def snapshot(d):
    """Everything extraction could change in d, and the bytes its file system uses."""
    entries = []
    for root, dirs, files in os.walk(d):
        for name in sorted(dirs + files):
            p = os.path.join(root, name)
            st = os.lstat(p)
            data = open(p, "rb").read() if os.path.isfile(p) else b""
            entries.append((os.path.relpath(p, d), st.st_mode, st.st_size, data))
    vfs = os.statvfs(d)
    st = os.stat(d)
    return sorted(entries), (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize, st.st_mtime_ns


def extract_cache(zip_path, cwd):
    return subprocess.run([RUNNER, "cache-extractor", "--file", str(zip_path)], cwd=cwd,
                          capture_output=True, text=True)


def error_lines(r, cause):
    """The helper's lines that name cause; exactly one is expected."""
    return [line for line in (r.stdout + r.stderr).splitlines() if cause in line]


def many_small_files(path, n=1000):
    """n files of 1 KiB (declared about 1 MiB); on tmpfs each takes a 4 KiB page."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(n):
            z.writestr(f"vendor/f{i:04}.bin", os.urandom(1024))


# ---- a zip of 10 GiB of zeros, about 10 MB, made in well under a second ----

def crc32_of_zeros(size):
    """CRC-32 of size zero bytes by zlib's crc32_combine: no 10 GiB pass."""
    libz = ctypes.CDLL("libz.so.1")
    libz.crc32_combine64.restype = ctypes.c_ulong
    libz.crc32_combine64.argtypes = [ctypes.c_ulong, ctypes.c_ulong, ctypes.c_int64]
    crc, block, left = 0, zlib.crc32(b"\0" * MIB), size
    assert size % MIB == 0
    step, bits = MIB, block
    while left:
        if left & step:
            crc = libz.crc32_combine64(crc, bits, step)
            left -= step
        bits = libz.crc32_combine64(bits, bits, step)
        step *= 2
    return crc


def deflated_zeros(size):
    """A raw deflate stream of size zeros: one full-flushed 1 MiB block, repeated."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(b"\0" * MIB) + c.flush(zlib.Z_FULL_FLUSH)
    again = c.compress(b"\0" * MIB) + c.flush(zlib.Z_FULL_FLUSH)
    assert first == again          # after a full flush nothing refers back
    return first * (size // MIB) + c.flush(zlib.Z_FINISH)


def zip64_one_entry(path, name, size, data, crc):
    """A ZIP64 archive of one deflated entry (the sizes only in the ZIP64 fields)."""
    name = name.encode()
    extra_local = struct.pack("<HHQQ", 1, 16, size, len(data))
    local = struct.pack("<IHHHHHIIIHH", 0x04034b50, 45, 0, 8, 0, 0x21, crc,
                        0xFFFFFFFF, 0xFFFFFFFF, len(name), len(extra_local))
    extra_cd = struct.pack("<HHQQQ", 1, 24, size, len(data), 0)
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, 0x031e, 45, 0, 8, 0, 0x21,
                          crc, 0xFFFFFFFF, 0xFFFFFFFF, len(name), len(extra_cd), 0, 0, 0,
                          0o100644 << 16, 0xFFFFFFFF) + name + extra_cd
    cd_offset = len(local) + len(name) + len(extra_local) + len(data)
    eocd64_offset = cd_offset + len(central)
    eocd64 = struct.pack("<IQHHIIQQQQ", 0x06064b50, 44, 45, 45, 0, 0, 1, 1,
                         len(central), cd_offset)
    locator = struct.pack("<IIQI", 0x07064b50, 0, eocd64_offset, 1)
    eocd = struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, 1, 1, len(central),
                       0xFFFFFFFF, 0)
    with open(path, "wb") as f:
        for part in (local, name, extra_local, data, central, eocd64, locator, eocd):
            f.write(part)


@pytest.fixture(scope="module")
def bomb_10gib(tmp_path_factory):
    path = tmp_path_factory.mktemp("bomb") / "bomb.zip"
    size = 10 * GIB
    zip64_one_entry(path, "zeros.bin", size, deflated_zeros(size), crc32_of_zeros(size))
    info = zipfile.ZipFile(path).getinfo("zeros.bin")
    assert info.file_size == size and os.path.getsize(path) < 12 * MIB
    return path


def lying_zip(path, declared=1000, real=8 * MIB):
    """One entry that says declared bytes and inflates to real bytes of 'x'."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("liar.bin", b"x" * real)
    data = bytearray(path.read_bytes())
    local = data.find(b"PK\x03\x04")
    central = data.find(b"PK\x01\x02")
    assert struct.unpack_from("<I", data, local + 22)[0] == real
    assert struct.unpack_from("<I", data, central + 24)[0] == real
    struct.pack_into("<I", data, local + 22, declared)
    struct.pack_into("<I", data, central + 24, declared)
    path.write_bytes(bytes(data))


# ---- cache-extractor ----

def test_a_cache_that_fills_the_disk_half_way_fails_and_leaves_nothing(small_fs, tmp_path):
    cache = tmp_path / "cache.zip"
    many_small_files(cache)
    before = snapshot(small_fs)
    r = extract_cache(cache, small_fs)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = error_lines(r, "No space left on device")
    assert len(lines) == 1, r.stdout + r.stderr
    assert re.search(r'"vendor/f\d{4}\.bin": write: No space left on device', lines[0]), lines
    assert "Extracted" not in r.stdout + r.stderr
    assert snapshot(small_fs) == before


def test_a_cache_declaring_10_gib_is_refused_before_anything_is_written(small_fs,
                                                                         bomb_10gib):
    before = snapshot(small_fs)
    r = extract_cache(bomb_10gib, small_fs)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = error_lines(r, "needs 10.0 GiB")
    assert len(lines) == 1, r.stdout + r.stderr
    assert re.search(r"bomb\.zip: needs 10\.0 GiB, \d+(\.\d)? [KM]iB free in "
                     + re.escape(str(small_fs)), lines[0]), lines
    assert snapshot(small_fs) == before


def test_a_header_that_lies_about_its_size_is_stopped_and_leaves_nothing(small_fs,
                                                                          tmp_path):
    liar = tmp_path / "liar.zip"
    lying_zip(liar)
    before = snapshot(small_fs)
    r = extract_cache(liar, small_fs)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = error_lines(r, "liar.bin")
    assert len(lines) == 1, r.stdout + r.stderr
    assert "more data than the 1000 bytes the archive declares" in lines[0], lines
    assert snapshot(small_fs) == before


def test_a_cache_that_fits_still_merges_into_the_project(small_fs, tmp_path):
    """The staging directory's move: new files in, the old ones kept, nothing left over."""
    cache = tmp_path / "cache.zip"
    many_small_files(cache, n=20)
    r = extract_cache(cache, small_fs)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (small_fs / "keep.txt").read_text() == "the project's own\n"
    assert len(list((small_fs / "vendor").iterdir())) == 20
    assert sorted(os.listdir(small_fs)) == ["keep.txt", "vendor"]


def test_a_directory_on_another_file_system_is_refused_before_anything_moves(small_fs,
                                                                              tmp_path):
    """rename(2) cannot cross into a mount below the project: said, not half done."""
    cache = tmp_path / "cache.zip"
    with zipfile.ZipFile(cache, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("aaa-first.txt", b"would come first\n")
        z.writestr("mnt/inside.txt", b"cannot be renamed there\n")
    inner = small_fs / "mnt"
    inner.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(inner)], check=True)
    try:
        before = snapshot(small_fs)
        r = extract_cache(cache, small_fs)
        assert r.returncode == 1, r.stdout + r.stderr
        lines = error_lines(r, "another file system")
        assert len(lines) == 1 and '"mnt": in ' in lines[0], r.stdout + r.stderr
        assert snapshot(small_fs) == before
    finally:
        subprocess.run(["umount", str(inner)], check=True)


# ---- artifacts-downloader ----

def download(gitlab, job, cwd):
    env = dict(os.environ, CI_JOB_TOKEN=job.token)
    return subprocess.run([RUNNER, "artifacts-downloader", "--url", gitlab.url,
                           "--id", str(job.id)], cwd=cwd, env=env,
                          capture_output=True, text=True)


def test_artifacts_that_fill_the_disk_or_declare_too_much_leave_nothing(
        gitlab, daemons, small_fs, tmp_path, bomb_10gib):
    full = tmp_path / "full.zip"
    many_small_files(full)
    for label, data, cause in (
            ("full", full.read_bytes(), r'"vendor/f\d{4}\.bin": write: No space left on device'),
            ("bomb", bomb_10gib.read_bytes(), r": needs 10\.0 GiB, \d+(\.\d)? [KM]iB free in ")):
        job = run_one(gitlab, daemons, tmp_path / label, name=label, script=["true"])
        gitlab.add_artifact(job, data)
        before = snapshot(small_fs)
        r = download(gitlab, job, small_fs)
        out = r.stdout + r.stderr
        assert r.returncode == 1, (label, out)
        lines = [line for line in out.splitlines() if re.search(cause, line)]
        assert len(lines) == 1, (label, out)
        assert "Extracted" not in out, (label, out)
        assert snapshot(small_fs) == before, label
