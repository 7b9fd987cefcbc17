"""Throwaway TLS material for tests: a CA, a server certificate, a client certificate.

Made with the `openssl` command line tool (OpenSSL 3, Debian package
`openssl`) rather than a Python package, so the double stays standard
library only.  Keys are EC P-256 (generation takes milliseconds, unlike
RSA) and everything is valid for one day: nothing here must outlive a test
session.

The server certificate names every way a test reaches the double
(IP:127.0.0.1, DNS:localhost, IP:::1), so hostname verification by the
client stays on.  The client certificate is signed by the same CA, which
is what the double trusts when it requires client certificates.
"""
import os
import subprocess
from dataclasses import dataclass

DAYS = "1"
CURVE = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]


@dataclass(frozen=True)
class TLSFiles:
    """Paths of the PEM files (keys are unencrypted)."""
    ca_cert: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str


def _openssl(args, cwd):
    proc = subprocess.run(["openssl"] + args, cwd=cwd, capture_output=True, text=True,
                          timeout=30)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed:\n{proc.stderr}")


def generate(directory, server_names=("IP:127.0.0.1", "DNS:localhost", "IP:::1"),
             client_cn="runner test client"):
    """Write ca.{crt,key}, server.{crt,key}, client.{crt,key} into directory.

    Returns a TLSFiles.  Three openssl invocations in total (`req -x509`
    with `-CA` signs in one step), about 30 ms.
    """
    directory = os.path.abspath(os.fspath(directory))
    os.makedirs(directory, exist_ok=True)
    p = lambda name: os.path.join(directory, name)  # noqa: E731
    _openssl(["req", "-x509"] + CURVE + [
        "-keyout", p("ca.key"), "-out", p("ca.crt"), "-days", DAYS,
        "-subj", "/CN=runner test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign"], directory)
    _openssl(["req", "-x509"] + CURVE + [
        "-keyout", p("server.key"), "-out", p("server.crt"), "-days", DAYS,
        "-subj", "/CN=localhost", "-CA", p("ca.crt"), "-CAkey", p("ca.key"),
        "-addext", "subjectAltName=" + ",".join(server_names),
        "-addext", "basicConstraints=critical,CA:FALSE",
        "-addext", "keyUsage=critical,digitalSignature",
        "-addext", "extendedKeyUsage=serverAuth"], directory)
    _openssl(["req", "-x509"] + CURVE + [
        "-keyout", p("client.key"), "-out", p("client.crt"), "-days", DAYS,
        "-subj", "/CN=" + client_cn, "-CA", p("ca.crt"), "-CAkey", p("ca.key"),
        "-addext", "basicConstraints=critical,CA:FALSE",
        "-addext", "keyUsage=critical,digitalSignature",
        "-addext", "extendedKeyUsage=clientAuth"], directory)
    return TLSFiles(ca_cert=p("ca.crt"), server_cert=p("server.crt"), server_key=p("server.key"),
                    client_cert=p("client.crt"), client_key=p("client.key"))


def existing(directory):
    """TLSFiles for a directory written earlier by generate(), or None."""
    directory = os.fspath(directory)
    files = TLSFiles(*(os.path.join(directory, n) for n in (
        "ca.crt", "server.crt", "server.key", "client.crt", "client.key")))
    return files if all(os.path.exists(f) for f in vars(files).values()) else None
