"""One POST to a PagerDuty Events v2 compatible endpoint, under one deadline.

``requests`` (like every HTTP client we know) times each connect and each read on its
own: a pager that answers a byte at a time keeps a call going for many timeouts, and a
name lookup has no timeout at all. A delivery holds its page for a bounded time and runs
beside a bounded number of others, so the whole call gets one deadline instead
(``plumbing.deadline``, the one the SMTP sends use): lookup, connect, TLS, the
request and the reply together, with a watchdog that cuts the socket when it passes.
"""

import email.utils
import json
import socket
import ssl
from datetime import UTC, datetime, timedelta
from http.client import HTTPConnection, HTTPException
from typing import Any
from urllib.parse import urlsplit

from plumbing.deadline import Deadline

# A Retry-After longer than this is taken as this: a pager that asks for an hour's silence
# would otherwise hold back every page, and an event's budget is minutes long.
LONGEST_PAUSE = timedelta(minutes=5)


class PagerError(Exception):
    """The pager did not accept the message, or did not say; it is retried.

    ``answered`` is False when the request may have reached the pager but no answer came
    (a timeout, a connection lost mid-exchange): the pager may have taken the message all
    the same. ``throttled`` when the pager asked us to slow down (429), for ``retry_after``
    if it said how long.
    """

    def __init__(
        self, message: str, *, answered: bool, throttled: bool = False, retry_after: timedelta | None = None
    ) -> None:
        super().__init__(message)
        self.answered = answered
        self.throttled = throttled
        self.retry_after = retry_after


def post(url: str, message: dict[str, Any], within: timedelta) -> None:
    """POST ``message`` as JSON to ``url``; return on 202 (the only success), raise ``PagerError`` otherwise."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    body = json.dumps(message).encode()
    deadline = Deadline(within)
    sock: socket.socket | None = None
    deadline.watch(lambda: sock)
    try:
        try:
            sock = socket.create_connection((deadline.resolve(host, port), port), timeout=deadline.clip(None))
            if parts.scheme == "https":
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
        except OSError as error:
            # Nothing was sent: the pager cannot have the message.
            raise PagerError(f"{type(error).__name__} reaching the pager", answered=True) from error
        connection = HTTPConnection(host, port)
        connection.sock = sock  # http.client sends over a socket it is given, and opens none itself
        try:
            sock.settimeout(deadline.clip(None))
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            connection.request("POST", target, body, {"Host": parts.netloc, "Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
        except (OSError, HTTPException) as error:
            # The watchdog's cut shows up as whatever the socket said last; name the cause.
            cause = (
                f"no answer within {within.total_seconds():g}s" if deadline.remaining() <= 0 else type(error).__name__
            )
            raise PagerError(f"{cause} waiting for the pager", answered=False) from error
        finally:
            connection.close()
    finally:
        deadline.stop_watching()
    if response.status == 429:
        pause = retry_after(response.getheader("Retry-After"))
        raise PagerError("pager answered 429", answered=True, throttled=True, retry_after=pause)
    if response.status != 202:
        raise PagerError(f"pager answered {response.status}", answered=True)


def retry_after(value: str | None, now: datetime | None = None) -> timedelta | None:
    """The pause a ``Retry-After`` header asks for (delta-seconds or an HTTP date), at most ``LONGEST_PAUSE``.

    None for a value that is neither. The header is the pager's input: no value of it may raise,
    since a raise aborts the delivery wave and its pages sent but not yet recorded go out again.
    """
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # RFC 9110's delta-seconds: ASCII digits only
        # Capped while still digits: timedelta cannot hold 10^14 seconds, and int() refuses
        # a string of over 4,300 digits. Nine digits (31 years) are far past the cap.
        digits = value.lstrip("0")
        if len(digits) > 9:
            return LONGEST_PAUSE
        return min(timedelta(seconds=int(digits or "0")), LONGEST_PAUSE)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if when.tzinfo is None:
        # "-0000" (RFC 5322: UTC, local zone unknown) parses to a naive time; an HTTP date is UTC.
        when = when.replace(tzinfo=UTC)
    return min(max(when - (now or datetime.now(UTC)), timedelta(0)), LONGEST_PAUSE)
