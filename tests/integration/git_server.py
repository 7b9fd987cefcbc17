"""A real git server over smart HTTP, for jobs that clone like they would from GitLab.

Why it exists: get_sources (protocol.md 9.2) is the runner driving the real
`git` against the URL in git_info.repo_url (4.5), with the job token as
`gitlab-ci-token:<token>@` userinfo.  Faking that would test nothing, so
this module serves real bare repositories through git's own CGI program,
`git http-backend`, behind the same Basic-auth rule GitLab applies, and
records every request so a test can see which repositories the runner
fetched and with which credentials.

- GitServer: threaded HTTP/1.1 server on 127.0.0.1 (keep-alive, chunked
  bodies both ways, gzip request bodies passed through to http-backend).
- make_repos / GitRepos: bare repositories with fixed SHAs (fixed names and
  dates), described in GitRepos.
- pytest fixtures git_repos (session) and git_server (per test).  They are
  found in a test module that imports them (`from git_server import
  git_repos, git_server`) or, for every module, from conftest.py doing
  `from git_server import *`.

Standard library only; needs `git` and git-http-backend.
"""
import base64
import http.server
import os
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Optional
from urllib.parse import quote, unquote, urlsplit

import pytest

__all__ = ["GitServer", "GitRequest", "GitRepos", "make_repos", "git_repos", "git_server",
           "JOB_TOKEN_USER", "git_env"]

JOB_TOKEN_USER = "gitlab-ci-token"
REALM = "GitLab"
IO_TIMEOUT = 30.0          # per socket operation, both directions
JOIN_TIMEOUT = 2.0         # stop() waits at most this long per connection thread
CHUNK = 64 * 1024


def _http_backend():
    """Path of git-http-backend (git --exec-path knows where git keeps it)."""
    try:
        exec_path = subprocess.run(["git", "--exec-path"], capture_output=True, text=True,
                                   timeout=10, check=True).stdout.strip()
        candidate = os.path.join(exec_path, "git-http-backend")
        if os.access(candidate, os.X_OK):
            return candidate
    except (OSError, subprocess.SubprocessError):
        pass
    return "/usr/lib/git-core/git-http-backend"


def git_env(extra=None):
    """Environment for test-side git commands: no user/system config, never prompt.

    Why: a developer's ~/.gitconfig (credential helpers, url rewrites,
    signing) must not change what a test sees, and a git that prompts for a
    password would hang the test instead of failing it.
    """
    env = dict(os.environ)
    for key in list(env):
        if key.startswith("GIT_"):
            del env[key]
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
                "GIT_TERMINAL_PROMPT": "0", "GCM_INTERACTIVE": "Never", "LC_ALL": "C"})
    env.pop("GIT_ASKPASS", None)
    env.pop("SSH_ASKPASS", None)
    if extra:
        env.update(extra)
    return env


# ---------------------------------------------------------------------------
# Records


@dataclass
class GitRequest:
    """One HTTP request as the server saw it (never the password)."""
    method: str
    path: str                  # URL path, percent-decoded, e.g. /group/project.git/info/refs
    query: str                 # raw query string, e.g. service=git-upload-pack
    user: Optional[str]        # Basic-auth user presented (None: no credentials)
    time: float                # time.time() when the request line arrived
    status: int = 0            # status sent (0 if the connection died first)
    user_agent: str = ""
    git_protocol: str = ""     # Git-Protocol header, "version=2" for protocol v2

    @property
    def repo(self):
        """Repository path without the leading slash, e.g. "group/project.git" ("" if none)."""
        head, sep, _ = self.path.partition(".git/")
        if sep:
            return head.lstrip("/") + ".git"
        return self.path.lstrip("/") if self.path.endswith(".git") else ""

    @property
    def service(self):
        """git-upload-pack / git-receive-pack for smart requests, else ""."""
        for name in ("git-upload-pack", "git-receive-pack"):
            if self.path.endswith("/" + name) or f"service={name}" in self.query:
                return name
        return ""


# ---------------------------------------------------------------------------
# The server


class GitServer:
    """Smart-HTTP git server over the bare repositories under root_dir.

    token: None serves anonymously (a public project).  A string (or a
    collection of strings, for several concurrent jobs) makes every request
    require Basic auth as gitlab-ci-token with one of them as password; the
    attribute is read per request, so a test may change it at any time.
    Anything else gets 401 with WWW-Authenticate: Basic realm="GitLab", as
    from GitLab.  A request without credentials is a challenge (git's first
    request always is: it sends the URL's credentials only after a 401);
    one with wrong credentials also counts in auth_failures.

    requests: GitRequest per request, in arrival order.  errors: tracebacks
    of the server's own failures (the fixture fails the test on them).
    backend_stderr: what http-backend printed (upload-pack errors etc.).
    """

    def __init__(self, root_dir, token=None):
        self.root_dir = os.path.abspath(str(root_dir))
        self.token = token
        self.requests = []
        self.auth_failures = 0
        self.errors = []
        self.backend_stderr = []
        self.backend = _http_backend()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = None
        self._thread = None
        self._conns = {}        # socket -> thread
        self._procs = set()

    # -- lifecycle ------------------------------------------------------------

    def start(self):
        if not os.access(self.backend, os.X_OK):
            pytest.fail(f"{self.backend} is missing: install git (Debian: package git)")
        self._stopping.clear()
        self._server = _Server(("127.0.0.1", 0), _Handler, self)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="git-server", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Stop accepting, cut every connection and CGI process, join. Idempotent, < 1 s."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            conns = list(self._conns.items())
            procs = list(self._procs)
        for sock, _ in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for proc in procs:
            try:
                proc.kill()
            except OSError:
                pass
        for _, thread in conns:
            thread.join(JOIN_TIMEOUT)
        self._thread.join(JOIN_TIMEOUT)
        self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- addresses ------------------------------------------------------------

    @property
    def port(self):
        return self._server.server_address[1]

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def clean_url(self, path):
        """http://127.0.0.1:PORT/<path>.git, without credentials ("group/project" or "...git")."""
        path = path.strip("/")
        if not path.endswith(".git"):
            path += ".git"
        return f"{self.url}/{path}"

    def repo_url(self, path, token=None):
        """clean_url with gitlab-ci-token:<token>@ userinfo, like git_info.repo_url.

        token defaults to the server's token (the first one, if several).
        """
        if token is None:
            token = self._accepted_tokens()[0] if self._accepted_tokens() else ""
        return self.clean_url(path).replace(
            "http://", f"http://{JOB_TOKEN_USER}:{quote(token, safe='')}@", 1)

    # -- records --------------------------------------------------------------

    def requests_for(self, repo):
        """Requests to one repository ("group/lib" or "group/lib.git")."""
        repo = repo.strip("/")
        if not repo.endswith(".git"):
            repo += ".git"
        with self._lock:
            return [r for r in self.requests if r.repo == repo]

    def summary(self):
        with self._lock:
            return "\n".join(f"  {r.method} {r.path}{'?' + r.query if r.query else ''} "
                             f"user={r.user} -> {r.status}" for r in self.requests)

    # -- internals ------------------------------------------------------------

    def _accepted_tokens(self):
        token = self.token
        if token is None:
            return None
        if isinstance(token, str):
            return [token]
        return list(token)

    def _record(self, req):
        with self._lock:
            self.requests.append(req)

    def _error(self, text):
        with self._lock:
            self.errors.append(text)


class _Server(http.server.ThreadingHTTPServer):
    """One thread per connection; connections and threads tracked so stop() can cut them."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, address, handler, git_server):
        self.git = git_server
        super().__init__(address, handler)

    def server_bind(self):
        # HTTPServer.server_bind looks up the FQDN, which can stall without DNS.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def process_request(self, request, client_address):
        thread = threading.Thread(target=self._serve_connection, args=(request, client_address),
                                  name="git-server-conn", daemon=True)
        with self.git._lock:
            self.git._conns[request] = thread
        thread.start()

    def _serve_connection(self, request, client_address):
        try:
            if not self.git._stopping.is_set():
                self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            with self.git._lock:
                self.git._conns.pop(request, None)

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if self.git._stopping.is_set() or isinstance(exc, (ConnectionError, TimeoutError)):
            return  # the client went away, or we are stopping: not the server's fault
        self.git._error(traceback.format_exc())


class _BodyError(Exception):
    """The request body could not be read (client stalled or sent bad chunking)."""


class _Handler(http.server.BaseHTTPRequestHandler):
    """Auth check, then the request as CGI to git http-backend, streamed both ways."""

    protocol_version = "HTTP/1.1"
    server_version = "git-server-fixture"
    timeout = IO_TIMEOUT       # StreamRequestHandler sets it on the socket

    def log_message(self, format, *args):
        pass  # requests are recorded in GitServer.requests instead

    def do_GET(self):
        self._serve()

    do_POST = do_HEAD = do_GET

    def _serve(self):
        git = self.server.git
        split = urlsplit(self.path)
        user, password = self._credentials()
        req = GitRequest(method=self.command, path=unquote(split.path), query=split.query,
                         user=user, time=time.time(),
                         user_agent=self.headers.get("User-Agent", ""),
                         git_protocol=self.headers.get("Git-Protocol", ""))
        git._record(req)
        accepted = git._accepted_tokens()
        if accepted is not None and not (user == JOB_TOKEN_USER and password in accepted):
            if user is not None:
                with git._lock:
                    git.auth_failures += 1
            self._drain_body()
            req.status = 401
            body = b"HTTP Basic: Access denied\n"
            self.send_response(401)
            self.send_header("WWW-Authenticate", f'Basic realm="{REALM}"')
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            return
        self._run_backend(req, split, remote_user=user if accepted is not None else None)

    def _credentials(self):
        """(user, password) from Authorization: Basic, or (None, None)."""
        header = self.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "basic":
            return (None, None) if not header else ("", None)
        try:
            user, _, password = base64.b64decode(value.strip(), validate=True) \
                .decode("utf-8").partition(":")
        except (ValueError, UnicodeDecodeError):
            return "", None
        return user, password

    # -- request body ---------------------------------------------------------

    def _body_chunks(self):
        """The request body as it arrives: Content-Length or chunked (git uses both)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            while True:
                line = self.rfile.readline(1024)
                if not line.endswith(b"\n"):
                    raise _BodyError("truncated chunk size line")
                try:
                    size = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise _BodyError(f"bad chunk size line {line!r}") from None
                if size == 0:
                    while self.rfile.readline(1024).strip():
                        pass  # trailers
                    return
                yield from self._read_exactly(size)
                if self.rfile.readline(8).strip():
                    raise _BodyError("chunk not followed by CRLF")
        else:
            yield from self._read_exactly(int(self.headers.get("Content-Length") or 0))

    def _read_exactly(self, n):
        while n > 0:
            data = self.rfile.read(min(n, CHUNK))
            if not data:
                raise _BodyError("client closed the connection mid-body")
            n -= len(data)
            yield data

    def _drain_body(self):
        """Read and drop the body, so a 401 can be answered on a keep-alive connection."""
        try:
            for _ in self._body_chunks():
                pass
        except (_BodyError, OSError):
            self.close_connection = True

    # -- CGI ------------------------------------------------------------------

    def _cgi_env(self, split, remote_user):
        git = self.server.git
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": git.root_dir,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": self.request_version,
            "SERVER_SOFTWARE": self.server_version,
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": str(self.server.server_port),
            "REMOTE_ADDR": self.client_address[0],
            "REQUEST_METHOD": self.command,
            "PATH_INFO": unquote(split.path),
            "QUERY_STRING": split.query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
        }
        if self.headers.get("Content-Length") is not None:
            env["CONTENT_LENGTH"] = self.headers["Content-Length"]
        # Without CONTENT_LENGTH (chunked request) http-backend reads to EOF.
        if remote_user:
            env["REMOTE_USER"] = remote_user
            env["AUTH_TYPE"] = "Basic"
        for name, value in self.headers.items():
            if name.lower() in ("authorization", "content-type", "content-length",
                                "transfer-encoding", "connection", "proxy-authorization"):
                continue
            # Content-Encoding (gzip bodies) and Git-Protocol (v2) matter to http-backend.
            env["HTTP_" + name.upper().replace("-", "_")] = value
        return env

    def _run_backend(self, req, split, remote_user):
        git = self.server.git
        proc = subprocess.Popen([git.backend], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=self._cgi_env(split, remote_user),
                                cwd=git.root_dir)
        with git._lock:
            git._procs.add(proc)
        body_ok = [True]
        writer = threading.Thread(target=self._feed, args=(proc, body_ok), daemon=True,
                                  name="git-server-stdin")
        stderr = threading.Thread(target=self._collect_stderr, args=(proc,), daemon=True,
                                  name="git-server-stderr")
        writer.start()
        stderr.start()
        try:
            self._relay_response(req, proc)
        finally:
            if proc.poll() is None:
                try:
                    proc.wait(IO_TIMEOUT if not git._stopping.is_set() else 0.1)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            # A writer still waiting for a body the backend no longer wants is
            # unblocked when the connection closes (below), not waited for.
            writer.join(0.2)
            stderr.join(JOIN_TIMEOUT)
            proc.stdout.close()
            with git._lock:
                git._procs.discard(proc)
            if not body_ok[0] or writer.is_alive():
                self.close_connection = True

    def _feed(self, proc, body_ok):
        """Request body -> CGI stdin (a thread, so a big push cannot deadlock with stdout)."""
        try:
            for data in self._body_chunks():
                proc.stdin.write(data)
        except BrokenPipeError:
            body_ok[0] = False   # backend stopped reading (error): the rest is unread
        except (_BodyError, OSError, ValueError):
            body_ok[0] = False
        finally:
            try:
                proc.stdin.close()
            except OSError:
                pass

    def _collect_stderr(self, proc):
        text = proc.stderr.read().decode("utf-8", "replace")
        proc.stderr.close()
        if text.strip():
            git = self.server.git
            with git._lock:
                git.backend_stderr.append(text)

    def _relay_response(self, req, proc):
        """CGI headers (with Status:) -> HTTP response; body streamed, chunked if no length."""
        status, reason, headers = 200, None, []
        while True:
            line = proc.stdout.readline(8192)
            if not line:
                if self.server.git._stopping.is_set():
                    self.close_connection = True
                    return
                raise RuntimeError(f"http-backend ended before its headers: {req}")
            line = line.rstrip(b"\r\n").decode("latin-1")
            if not line:
                break
            name, _, value = line.partition(":")
            value = value.strip()
            if name.lower() == "status":
                code, _, reason = value.partition(" ")
                status = int(code)
            else:
                headers.append((name, value))
        req.status = status
        has_length = any(n.lower() == "content-length" for n, _ in headers)
        chunked = not has_length and self.request_version == "HTTP/1.1"
        if not has_length and not chunked:
            self.close_connection = True   # HTTP/1.0 client: the end of the body is EOF
        self.send_response(status, reason or None)
        for name, value in headers:
            self.send_header(name, value)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if self.command == "HEAD":
            return
        while True:
            data = proc.stdout.read1(CHUNK)
            if not data:
                break
            if chunked:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            else:
                self.wfile.write(data)
        if self.server.git._stopping.is_set():
            self.close_connection = True   # killed by stop(): a cut body must not look whole
            return
        if chunked:
            self.wfile.write(b"0\r\n\r\n")


# ---------------------------------------------------------------------------
# Repositories

BASE_TIME = 1704067200     # 2024-01-01T00:00:00Z; commit n is n minutes later
AUTHOR = ("Fixture Author", "author@example.com")
COMMITTER = ("Fixture Committer", "committer@example.com")


class GitRepos:
    """Bare repositories under root, built with fixed names and dates so the SHAs are stable.

    group/project.git (HEAD: main):
        main: c1 README.md, c2 src/a.txt, c3 src/b.txt (tag v1.0, annotated),
              c4 .gitmodules + gitlink lib -> lib_head (url ../lib.git), c5 src/c.txt
        feature: c3 + one commit (src/feature.txt)
        refs/merge-requests/1/head: c5 + one commit on no branch (src/mr.txt)
        refs/pipelines/1: c5, so job_payload's default refspecs fetch as-is
    group/lib.git (HEAD: main): 2 commits (lib.txt)

    Attributes (40-hex SHAs): main_head (c5), main_tilde2 (c3 == tag_commit),
    tag_commit, tag_object (the annotated tag object), feature_head, mr_head,
    lib_head, main_commits (c1..c5, oldest first).  The repositories are
    read-only over HTTP (http.receivepack false), so tests can share them.
    """

    project = "group/project"
    lib = "group/lib"

    def __init__(self, root_dir):
        self.root = os.path.abspath(str(root_dir))
        self._tick = 0
        os.makedirs(self.root, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="git-repos-work-") as work:
            self._build_lib(os.path.join(work, "lib"))
            self._build_project(os.path.join(work, "project"))

    def path(self, repo):
        """Filesystem path of a bare repository ("group/project" or "group/project.git")."""
        return os.path.join(self.root, repo if repo.endswith(".git") else repo + ".git")

    def shas(self):
        """The exposed SHAs by name (for messages and pinning)."""
        return {k: getattr(self, k) for k in ("main_head", "main_tilde2", "tag_commit",
                                              "tag_object", "feature_head", "mr_head",
                                              "lib_head")}

    # -- building -------------------------------------------------------------

    def _git(self, cwd, *args):
        self._tick += 1
        date = f"@{BASE_TIME + 60 * self._tick} +0000"
        env = git_env({"GIT_AUTHOR_NAME": AUTHOR[0], "GIT_AUTHOR_EMAIL": AUTHOR[1],
                       "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_NAME": COMMITTER[0],
                       "GIT_COMMITTER_EMAIL": COMMITTER[1], "GIT_COMMITTER_DATE": date})
        done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} failed in {cwd}:\n{done.stderr}")
        return done.stdout.strip()

    def _commit(self, work, message, files):
        for name, content in files.items():
            full = os.path.join(work, name)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(content)
        self._git(work, "add", "--", *files)
        self._git(work, "commit", "-q", "--no-verify", "-m", message)
        return self._git(work, "rev-parse", "HEAD")

    def _publish(self, work, repo):
        """Push every ref of the work repository into a new bare repository."""
        bare = self.path(repo)
        os.makedirs(os.path.dirname(bare), exist_ok=True)
        self._git(self.root, "init", "-q", "--bare", "-b", "main", "--object-format=sha1",
                  bare)
        self._git(bare, "config", "http.receivepack", "false")
        # Gitaly allows fetching any object by SHA; so does this server.
        self._git(bare, "config", "uploadpack.allowAnySHA1InWant", "true")
        self._git(work, "push", "-q", "--mirror", bare)

    def _build_lib(self, work):
        self._git(os.path.dirname(work), "init", "-q", "-b", "main", "--object-format=sha1",
                  work)
        self._commit(work, "lib: initial", {"lib.txt": "lib 1\n"})
        self.lib_head = self._commit(work, "lib: second", {"lib.txt": "lib 2\n"})
        self._publish(work, self.lib)

    def _build_project(self, work):
        self._git(os.path.dirname(work), "init", "-q", "-b", "main", "--object-format=sha1",
                  work)
        c = [self._commit(work, "Initial commit", {"README.md": "# project\n"}),
             self._commit(work, "Add a", {"src/a.txt": "a\n"}),
             self._commit(work, "Add b", {"src/b.txt": "b\n"})]
        self._git(work, "tag", "-a", "v1.0", "-m", "Release 1.0")
        self._git(work, "checkout", "-q", "-b", "feature")
        self.feature_head = self._commit(work, "Feature work", {"src/feature.txt": "feature\n"})
        self._git(work, "checkout", "-q", "main")
        # The submodule as GitLab projects usually have it: a URL relative to
        # the superproject's, so it resolves to this same server.
        self._git(work, "update-index", "--add", "--cacheinfo", f"160000,{self.lib_head},lib")
        c.append(self._commit(work, "Add lib submodule", {".gitmodules": (
            '[submodule "lib"]\n\tpath = lib\n\turl = ../lib.git\n')}))
        c.append(self._commit(work, "Add c", {"src/c.txt": "c\n"}))
        self._git(work, "checkout", "-q", "--detach", "main")
        self.mr_head = self._commit(work, "MR change", {"src/mr.txt": "mr\n"})
        self._git(work, "checkout", "-q", "main")
        self._git(work, "update-ref", "refs/merge-requests/1/head", self.mr_head)
        self._git(work, "update-ref", "refs/pipelines/1", c[-1])
        self.main_commits = c
        self.main_head, self.main_tilde2, self.tag_commit = c[4], c[2], c[2]
        self.tag_object = self._git(work, "rev-parse", "v1.0")
        self._publish(work, self.project)


def make_repos(root_dir):
    """Build the fixture repositories under root_dir; returns the GitRepos."""
    return GitRepos(root_dir)


# ---------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="session")
def git_repos(tmp_path_factory):
    """The fixture repositories, built once per session (read-only over HTTP)."""
    if shutil.which("git") is None:
        pytest.fail("git is missing: install git")
    return make_repos(tmp_path_factory.mktemp("git-repos"))


@pytest.fixture
def git_server(git_repos):
    """A started GitServer over git_repos, anonymous until the test sets .token.

    Fails the test at teardown if the server itself hit a bug (.errors).
    """
    server = GitServer(git_repos.root).start()
    server.repos = git_repos
    try:
        yield server
    finally:
        server.stop()
    if server.errors:
        pytest.fail("the git server itself failed:\n" + "\n".join(server.errors)
                    + "\nrequests:\n" + server.summary(), pytrace=False)
