"""Workhorse in front of Rails: long polling of POST /jobs/request (protocol.md 4.4).

Why it exists: on a real GitLab a job request that carries a current
`last_update` is not answered at once; Workhorse holds it (typically
50 s) watching the runner's queue key in Redis, and answers 204 itself
when the key changes or the time is up.  A runner that sets a request
timeout shorter than the hold, or that takes Workhorse's own 204 (which
has no X-GitLab-Last-Update) as "forget the value", misbehaves only
against such a server, so the double can play Workhorse too.

`long_poll` (seconds, 0 = off) turns it on.  With it on, a request whose
JSON body has both `token` and `last_update`:

- runner's queue value differs from last_update (or unknown token) ->
  passed to Rails (the double's endpoint) at once;
- otherwise held, under a Condition tied to the double's lock, until the
  queue value changes (tick_queue, add_job) -> 204 at once, or until
  long_poll seconds passed -> 204, or until stop() -> the connection is
  dropped.  Workhorse's 204s carry no X-GitLab-Last-Update.

Every answer on that route then carries `Gitlab-Ci-Builds-Polling: yes`,
and bodies above 32 KiB get 413 (Workhorse reads at most that much).
The hold is recorded on the Request: `held` (seconds) and
`hold_outcome`: "holding" while it lasts (so a test can wait for the
hold to have begun), then "changed", "timeout" or "stopped".
"""
import json
import threading
import time

from .double import API_PREFIX, Response, no_content

LONG_POLL_PATH = API_PREFIX + "/jobs/request"
MAX_BODY = 32 * 1024
POLLING_HEADER = ("Gitlab-Ci-Builds-Polling", "yes")
STOPPED = object()      # _workhorse_front: the double is stopping, drop the connection


def _watch_params(body):
    """(token, last_update) when Workhorse would watch for this body, else None."""
    try:
        params = json.loads(body)
    except ValueError:
        return None
    if not isinstance(params, dict):
        return None
    token, last = params.get("token"), params.get("last_update")
    if isinstance(token, str) and token and isinstance(last, str) and last:
        return token, last
    return None


class WorkhorseMixin:
    """Long polling in front of the job request endpoint; needs GitLabDouble's lock."""

    def _workhorse_init(self, long_poll):
        self.long_poll = long_poll
        # Notified whenever a queue value changes and on stop(); waiting on
        # it releases the double's lock, so holding blocks nobody.
        self._queue_changed = threading.Condition(self._lock)

    def _long_polling(self, req):
        return bool(self.long_poll) and req.method == "POST" and req.path == LONG_POLL_PATH

    def _workhorse_headers(self, req):
        """Headers Workhorse adds to every answer on the long-polled route."""
        return [POLLING_HEADER] if self._long_polling(req) else []

    def _notify_queue_changed(self):
        with self._lock:
            self._queue_changed.notify_all()

    def _queue_value(self, token):
        r = self.runner(token)
        return None if r is None else r.queue_value

    def _workhorse_front(self, req):
        """What Workhorse answers itself: None (pass to Rails), a Response, or STOPPED.

        May block up to long_poll seconds; called without the lock held.
        """
        if not self._long_polling(req):
            return None
        if len(req.body) > MAX_BODY:
            return Response(413, b"Request Entity Too Large\n",
                            [("Content-Type", "text/plain; charset=utf-8")])
        watch = _watch_params(req.body)
        if watch is None:
            return None
        token, last = watch
        with self._lock:
            if self._queue_value(token) != last:
                return None
            req.hold_outcome = "holding"
            req.hold_outcome, req.held = self._hold(token, last, float(self.long_poll))
        if req.hold_outcome == "stopped":
            return STOPPED
        return no_content()

    def _hold(self, token, last, seconds):
        """Wait (lock held, released while waiting) for a change; (outcome, seconds held)."""
        start = time.monotonic()
        deadline = start + seconds
        while True:
            if self._stopping.is_set():
                return "stopped", time.monotonic() - start
            if self._queue_value(token) != last:
                return "changed", time.monotonic() - start
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout", time.monotonic() - start
            self._queue_changed.wait(remaining)
