"""The real ``twilio`` REST client, pointed at Twilio or at the provider simulator, each request under one deadline.

The library hands ``requests`` a timeout that applies to each connect and each read on its
own, and ``requests`` looks names up with no timeout at all: a Twilio (or a network) that
answers a byte at a time keeps a call going for many timeouts, past the lease the worker
holds for it. So every request here runs under one deadline (``plumbing.deadline``,
the SMTP sends' own) of ``request_bound(timeout)``: the name is looked up where the lookup
can be abandoned, the connect (and TLS handshake, which Python bounds by the socket's
timeout as a whole) waits only for the time left, and a watchdog cuts the connection at the
deadline whichever read it is in.
"""

import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from requests.adapters import HTTPAdapter
from twilio.http.http_client import TwilioHttpClient
from twilio.http.response import Response
from twilio.rest import Client
from urllib3 import HTTPConnectionPool, HTTPSConnectionPool, ProxyManager
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError

from plumbing.deadline import Deadline, DeadlinePassed

# The library logs every request's query string at INFO, and a message list is
# filtered by the destination number: keep it out of our logs.
_library_log = logging.getLogger("twilio.http_client")
_library_log.setLevel(logging.WARNING)

# The deadline of the request this thread (or task) is making: urllib3 makes its connections
# deep inside ``requests``, which passes nothing of ours down to them.
_serving: ContextVar[Deadline] = ContextVar("twilio_request_deadline")


def request_bound(timeout: float) -> timedelta:
    """Return the one deadline of a request made with the client's ``timeout``.

    A request is a connect and one small answer: two timeouts. Each adapter call is one
    request (a lookup reads one page of at most ``LOOKUP_LIMIT`` messages).
    """
    return timedelta(seconds=2 * timeout)


class _DeadlineHTTPConnection(HTTPConnection):
    """urllib3's connection, every step of a request under the deadline of the request it serves."""

    _deadline: Deadline | None = None

    def _serve(self) -> Deadline:
        deadline = _serving.get()
        if self._deadline is not deadline:
            self._deadline = deadline
            # A kept connection goes back to the pool once its answer is read and may serve
            # another request (another thread's) before this one's watchdog is stopped: it is
            # cut only while it still serves this request.
            deadline.watch(lambda: self.sock if self._deadline is deadline else None)
        return deadline

    def _new_conn(self) -> socket.socket:
        deadline = self._serve()
        name = self._dns_host
        try:
            address = deadline.resolve(name, self.port)
            self.timeout = deadline.clip(self.timeout)
        except DeadlinePassed as error:
            # Raised as urllib3 raises its own connect timeout, so it reads as one: nothing was sent.
            raise ConnectTimeoutError(self, f"no connection within the request's deadline ({error})") from error
        except socket.gaierror as error:
            raise NameResolutionError(name, self, error) from error
        except OSError as error:
            raise NewConnectionError(self, f"Failed to look up {name}: {error}") from error
        # urllib3 connects to ``_dns_host``; TLS checks ``host``, which reads ``_dns_host`` too:
        # the looked-up address stands in for the name only while the socket is made.
        self._dns_host = address
        try:
            return super()._new_conn()
        finally:
            self._dns_host = name

    def request(self, *args: Any, **kwargs: Any) -> None:
        deadline = self._serve()
        try:
            deadline.clip(None)
        except DeadlinePassed as error:
            # The connection took all the time: the request was never sent.
            raise ConnectTimeoutError(self, "the request's deadline passed before it was sent") from error
        super().request(*args, **kwargs)


class _DeadlineHTTPSConnection(_DeadlineHTTPConnection, HTTPSConnection):
    """The same over TLS (Twilio's API)."""


class _DeadlineHTTPPool(HTTPConnectionPool):
    ConnectionCls = _DeadlineHTTPConnection


class _DeadlineHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _DeadlineHTTPSConnection


_POOLS = {"http": _DeadlineHTTPPool, "https": _DeadlineHTTPSPool}


class _DeadlineAdapter(HTTPAdapter):
    """requests' adapter whose pools make deadline connections (through an HTTP(S) proxy too)."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if type(manager) is ProxyManager:  # a SOCKS proxy's manager makes connections of its own kind
            manager.pool_classes_by_scheme = _POOLS
        return manager


class _DeadlineHttpClient(TwilioHttpClient):  # type: ignore[misc]
    """The library's client, each request under one deadline; with ``base``, sent there instead.

    The client builds ``https://api.twilio.com/...`` itself; with ``base`` only the scheme
    and host change, so paths, query strings, auth and form bodies are the library's own.
    """

    def __init__(self, timeout: float, base: str | None) -> None:
        super().__init__(timeout=timeout, logger=_library_log)
        self._within = request_bound(timeout)
        self._base = urlsplit(base) if base else None
        # The library's own pool size; no retries (requests' default), since a create retried
        # by the transport layer could send the SMS twice.
        adapter = _DeadlineAdapter(pool_maxsize=min(32, (os.cpu_count() or 1) + 4))
        self.session.mount("https://", adapter)
        self.session.mount("http://", adapter)

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Response:
        if self._base is not None:
            parts = urlsplit(url)
            url = urlunsplit((self._base.scheme, self._base.netloc, parts.path, parts.query, parts.fragment))
        with _deadline(self._within) as deadline:
            response = super().request(method, url, *args, **kwargs)
            if deadline.remaining() <= 0:
                # The watchdog may have cut the answer short, and a cut read looks like the
                # answer's end: whatever arrived is not an answer to act on.
                raise requests.Timeout(f"no whole answer within {self._within.total_seconds():g}s")
        return response


@contextmanager
def _deadline(within: timedelta) -> Iterator[Deadline]:
    deadline = Deadline(within)
    token = _serving.set(deadline)
    try:
        yield deadline
    finally:
        _serving.reset(token)
        deadline.stop_watching()


def make_client(account_sid: str, auth_token: str, *, api_base: str | None, timeout: float) -> Client:
    """Return a Twilio client whose every request ends within ``request_bound(timeout)``; with
    ``api_base`` every request goes there (the simulator)."""
    return Client(account_sid, auth_token, http_client=_DeadlineHttpClient(timeout, api_base))
