"""Rate limits: each service gets ``API_RATE_LIMIT`` requests, whatever its token; each client
address gets ``API_AUTH_FAILURES_PER_CLIENT`` requests without a valid token.

A service's requests are counted in ``RATE_LIMIT_STORAGE`` over a moving window: at most
the limit in any stretch of its period. In Redis, when ``REDIS_CACHE_URL`` is set, so every web
process counts together, by the ``limits`` library, each request one script there timed by
Redis's own clock (``plumbing.redis_window``); in this process's memory otherwise, by
``plumbing.ratelimit.InProcessWindow``, each request one step under a lock. The
cache-backed throttle this replaces read the window's whole history, added to it and wrote it
back: requests racing in several processes overwrote each other's counts (1,390 let through
against a limit of 1,000 in ``tests/api/test_service_rate_limit.py``), and every request moved
a history as long as the limit.
"""

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.http import HttpRequest
from limits.errors import StorageError
from ninja.errors import Throttled
from ninja.throttling import BaseThrottle
from redis import RedisError

from notify.models import ServiceToken
from plumbing.once import OncePerProcess
from plumbing.pause import Pause
from plumbing.ratelimit import FailureCount, limiter_for, rate_item, seconds_until_reset

AUTH_FAILURES = FailureCount("api-auth", "API_AUTH_FAILURES_PER_CLIENT")
log = logging.getLogger("notify.api")
NAMESPACE = "api-service"
# How long a process goes on without asking a store of the rate limits that failed, before it asks again.
STORE_RETRY_SECONDS = 5.0


class TooManyAuthFailures(Throttled):
    """An address that sent too many requests without a valid token, refused before any lookup."""


class PerService(BaseThrottle):
    """``API_RATE_LIMIT`` requests per service, in any moving window of its period."""

    def __init__(self) -> None:
        # One instance serves every request of the process, in several threads at once: what
        # wait() needs of the request just refused is kept per thread.
        self._refused = threading.local()

    def allow_request(self, request: HttpRequest) -> bool:
        token = getattr(request, "auth", None)
        if not isinstance(token, ServiceToken):
            return True  # unauthenticated requests are refused before this matters
        # Read per request, not once at import: they are configuration, not code.
        limiter, item = limiter_for(settings.RATE_LIMIT_STORAGE), rate_item(settings.API_RATE_LIMIT)
        if counted("service", lambda: limiter.hit(item, NAMESPACE, token.service), otherwise=True):
            return True
        self._refused.window = (limiter, item, token.service)
        return False

    def wait(self) -> float:
        """Seconds until the oldest request counted in the window leaves it (Retry-After)."""
        limiter, item, service = self._refused.window
        stats = counted("service", lambda: limiter.get_window_stats(item, NAMESPACE, service), otherwise=None)
        if stats is None:  # the count just refused this request: wait a whole period
            return float(item.get_expiry())
        return seconds_until_reset(stats)


T = TypeVar("T")
U = TypeVar("U")


def counted(limit: str, ask: Callable[[], T], *, otherwise: U) -> T | U:
    """Ask the store of the rate limits; if it is down or slow, go on uncounted with ``otherwise``.

    As an unreachable broker costs a wake-up hint and not the request, a rate limit that cannot
    be counted costs the count: a password reset refused, or held while a dead connection times
    out, would cost the subscriber the reset. One failure (REDIS_CACHE_TIMEOUT at most) pauses
    this process's asking (``plumbing.pause``): for STORE_RETRY_SECONDS every request goes on
    without asking, then one asks again. Without it, every request waited out the timeout on every ask
    (0.25 s, twice a request): with a stuck Redis the web's threads served some 30 requests a second.
    """
    pause = pause_for(settings.RATE_LIMIT_STORAGE)
    if pause.active():
        log.warning("rate_limit_unavailable", extra={"limit": limit, "error": "paused"})
        return otherwise
    try:
        return ask()
    except (StorageError, RedisError) as error:  # only the store's: anything else is a bug, and is raised
        pause.start()
        log.warning("rate_limit_unavailable", extra={"limit": limit, "error": type(error).__name__})
        return otherwise


@OncePerProcess
def pause_for(storage: str) -> Pause:
    """This process's pause for the store at ``storage``: after one failure, STORE_RETRY_SECONDS without asking."""
    return Pause(STORE_RETRY_SECONDS)
