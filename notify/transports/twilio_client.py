"""The real ``twilio`` REST client, pointed at Twilio or at the provider simulator."""

import logging
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from twilio.http.http_client import TwilioHttpClient
from twilio.http.response import Response
from twilio.rest import Client

# The library logs every request's query string at INFO, and a message list is
# filtered by the destination number: keep it out of our logs.
_library_log = logging.getLogger("twilio.http_client")
_library_log.setLevel(logging.WARNING)


class _RebasedHttpClient(TwilioHttpClient):  # type: ignore[misc]
    """Send each request to ``base`` instead of the host the library wrote into the URL.

    The client builds ``https://api.twilio.com/...`` itself; only the scheme and
    host change, so paths, query strings, auth and form bodies are the library's own.
    """

    def __init__(self, base: str, timeout: float) -> None:
        super().__init__(timeout=timeout, logger=_library_log)
        self._base = urlsplit(base)

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Response:
        parts = urlsplit(url)
        rebased = urlunsplit((self._base.scheme, self._base.netloc, parts.path, parts.query, parts.fragment))
        return super().request(method, rebased, *args, **kwargs)


def make_client(account_sid: str, auth_token: str, *, api_base: str | None, timeout: float) -> Client:
    """Return a Twilio client; with ``api_base`` every request goes there (the simulator)."""
    http_client = (
        _RebasedHttpClient(api_base, timeout) if api_base else TwilioHttpClient(timeout=timeout, logger=_library_log)
    )
    return Client(account_sid, auth_token, http_client=http_client)
