"""A real nginx in front of the double: TLS with HTTP/2, and limit_req, the
rate limiting a self-hosted GitLab's reverse proxy typically applies.

nginx runs in the foreground from a private prefix (config, logs, temp
files) on a free loopback port, and is stopped at teardown.  Its access log
records, per request, nginx's connection number and the protocol, which is
how tests see HTTP/2 and connection reuse from the outside.
"""
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

CONF = """\
{user}
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 512; }}
http {{
    log_format front '$connection $server_protocol $request_method $uri $status';
    access_log {dir}/access.log front;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    limit_req_zone $binary_remote_addr zone=front:1m rate={rate}r/s;
    limit_req_status 429;
    server {{
        listen 127.0.0.1:{port} ssl http2;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        location / {{
            {limit}
            proxy_pass http://127.0.0.1:{upstream};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
}}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NginxFront:
    def __init__(self, directory, upstream_port, tls, rate=None):
        self.dir = str(directory)
        self.port = free_port()
        os.makedirs(self.dir, exist_ok=True)
        conf = CONF.format(user="user root;" if os.geteuid() == 0 else "", dir=self.dir,
                           port=self.port, cert=tls.server_cert, key=tls.server_key,
                           upstream=upstream_port, rate=rate or 1000,
                           limit="limit_req zone=front nodelay;" if rate else "")
        self.conf = os.path.join(self.dir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.proc = None

    @property
    def url(self):
        return f"https://127.0.0.1:{self.port}"

    def start(self):
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        if not os.access(nginx, os.X_OK):
            pytest.fail("nginx is missing: packaging/install-deps.sh installs nginx-light")
        self.proc = subprocess.Popen([nginx, "-p", self.dir, "-c", self.conf],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail("nginx did not start: " + self.proc.stderr.read().decode())
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        pytest.fail("nginx did not listen within 10 s")

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def access_log(self):
        """[(connection, protocol, method, uri, status)] in order."""
        path = os.path.join(self.dir, "access.log")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [tuple(l.split()) for l in f if l.strip()]
