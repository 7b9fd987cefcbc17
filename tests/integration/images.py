"""Job images made from this machine alone, for the docker executor's tests and the demo.

runner-test/runtime:1 is the Debian base of `make rootfs` (imported by the
fixtures); runner-test/busybox:1 is Debian's busybox-static with a link per
applet: no bash, no libc, a job image unlike the helper's.
"""
import io
import subprocess
import tarfile

RUNTIME_IMAGE = "runner-test/runtime:1"
BUSYBOX_IMAGE = "runner-test/busybox:1"
BUSYBOX = "/usr/bin/busybox"


def busybox_tar():
    """An image tar (for `docker import -`) of Debian's static busybox and its applets."""
    applets = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True,
                             check=True).stdout.split()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for d in ("bin", "tmp", "etc", "root"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            t.addfile(info)
        t.add(BUSYBOX, arcname="bin/busybox")
        for a in applets:
            if a != "busybox":
                info = tarfile.TarInfo(f"bin/{a}")
                info.type, info.linkname = tarfile.SYMTYPE, "busybox"
                t.addfile(info)
        passwd = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size = len(passwd)
        t.addfile(info, io.BytesIO(passwd))
    return buf.getvalue()
