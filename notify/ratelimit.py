"""Failed attempts counted per client address or per account, for the login and API throttles.

Counts live in Django's default cache: Redis when ``REDIS_CACHE_URL`` is set, so every web
process counts together; per-process memory otherwise (one process, or a demo). Windows are
fixed (aligned to the epoch), so a count is one key that expires by itself: a client may
fit up to twice the limit across a boundary, which is fine for slowing guessing down.
"""

import math
import time
from typing import Protocol

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest
from django.utils.crypto import salted_hmac


class Rate(Protocol):
    """At most ``limit`` per ``seconds``: a rate setting as ``config.env.env_rate`` parses it."""

    @property
    def limit(self) -> int: ...
    @property
    def seconds(self) -> int: ...


def client_address(request: HttpRequest) -> str:
    """Return the address the request came from, as far as our own proxies vouch for it.

    ``X-Forwarded-For`` is read only when ``DJANGO_PROXY_HOPS`` proxies are declared in
    front of us: anyone can send the header, so only the entry the outermost of our own
    proxies appended can be trusted, and without proxies it is ignored altogether.
    """
    hops: int = settings.PROXY_HOPS
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if hops and forwarded:
        chain = [hop.strip() for hop in str(forwarded).split(",")]
        return chain[-min(hops, len(chain))]
    return str(request.META.get("REMOTE_ADDR", ""))


class FailureCount:
    """Failures per identity (an address, an account) under the rate named by ``setting``."""

    def __init__(self, scope: str, setting: str) -> None:
        self.scope = scope
        self.setting = setting

    def retry_after(self, identity: str) -> int | None:
        """Seconds until ``identity`` may try again, or None while it is under its limit."""
        rate, now = self._rate(), time.time()
        if cache.get(self._key(identity, rate, now), 0) < rate.limit:
            return None
        window_ends = (math.floor(now / rate.seconds) + 1) * rate.seconds
        return max(1, math.ceil(window_ends - now))

    def add(self, identity: str) -> None:
        rate, now = self._rate(), time.time()
        key = self._key(identity, rate, now)
        # add() then incr(): both atomic in Redis and in local memory, so failures that
        # arrive together are all counted; the window's key expires with the window.
        cache.add(key, 0, timeout=rate.seconds)
        try:
            cache.incr(key)
        except ValueError:  # expired between the two calls: a new window has begun
            cache.set(key, 1, timeout=rate.seconds)

    def clear(self, identity: str) -> None:
        """Forget ``identity``'s failures in the current window (an operator lifting a lock-out)."""
        rate = self._rate()
        cache.delete(self._key(identity, rate, time.time()))

    def _rate(self) -> Rate:
        # Read per call, not once at import: it is configuration, not code.
        rate: Rate = getattr(settings, self.setting)
        return rate

    def _key(self, identity: str, rate: Rate, now: float) -> str:
        # Keyed digest: cache keys (visible to anyone listing Redis) carry no address or
        # user name, and an IPv4 address cannot be recovered by hashing all 2^32 of them.
        digest = salted_hmac(f"ratelimit.{self.scope}", identity).hexdigest()[:32]
        return f"failures:{self.scope}:{digest}:{rate.seconds}:{math.floor(now / rate.seconds)}"
