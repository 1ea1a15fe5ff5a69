"""Rate limits: each service gets ``API_RATE_LIMIT`` requests, whatever its token; each client
address gets ``API_AUTH_FAILURES_PER_CLIENT`` requests without a valid token.

A service's requests are counted in ``API_RATE_LIMIT_STORAGE`` over a moving window: at most
the limit in any stretch of its period. In Redis, when ``REDIS_CACHE_URL`` is set, so every web
process counts together, by the ``limits`` library, each request one script there timed by
Redis's own clock (``notify.api.redis_window``); in this process's memory otherwise, by
``InProcessWindow``, each request one step under a lock. The
cache-backed throttle this replaces read the window's whole history, added to it and wrote it
back: requests racing in several processes overwrote each other's counts (1,390 let through
against a limit of 1,000 in ``tests/api/test_service_rate_limit.py``), and every request moved
a history as long as the limit.
"""

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from functools import cache
from typing import Any, Protocol, TypeVar

from django.conf import settings
from django.http import HttpRequest
from limits import RateLimitItem, RateLimitItemPerSecond
from limits.errors import StorageError
from limits.strategies import MovingWindowRateLimiter
from limits.util import WindowStats
from ninja.errors import Throttled
from ninja.throttling import BaseThrottle
from redis import RedisError

from notify.api.redis_window import ServerClockRedisStorage
from notify.models import ServiceToken
from notify.once import OncePerProcess
from notify.pause import Pause
from notify.ratelimit import FailureCount, Rate

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
        limiter, item = limiter_for(settings.API_RATE_LIMIT_STORAGE), _item(settings.API_RATE_LIMIT)
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
        return max(0.0, float(stats.reset_time) - time.time())


T = TypeVar("T")
U = TypeVar("U")


def counted(limit: str, ask: Callable[[], T], *, otherwise: U) -> T | U:
    """Ask the store of the rate limits; if it is down or slow, go on uncounted with ``otherwise``.

    As an unreachable broker costs a wake-up hint and not the request, a rate limit that cannot
    be counted costs the count: a password reset refused, or held while a dead connection times
    out, would cost the subscriber the reset. One failure (REDIS_CACHE_TIMEOUT at most) pauses
    this process's asking (``notify.pause``): for STORE_RETRY_SECONDS every request goes on
    without asking, then one asks again. Without it, every request waited out the timeout on every ask
    (0.25 s, twice a request): with a stuck Redis the web's threads served some 30 requests a second.
    """
    pause = pause_for(settings.API_RATE_LIMIT_STORAGE)
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


@OncePerProcess
def limiter_for(storage: str) -> "Limiter":
    """The limiter counting in ``storage`` (a ``limits`` storage URI), made once per process.

    Its errors come wrapped as ``StorageError`` whatever the store, and a Redis store waits at
    most the cache's timeouts (REDIS_CACHE_OPTIONS) to connect or for an answer."""
    if storage.startswith("memory://"):
        return InProcessWindow()
    # Timed by Redis's clock, not this host's: the hosts asking it need not agree on the time.
    timeouts: dict[str, Any] = settings.REDIS_CACHE_OPTIONS
    counts = ServerClockRedisStorage(storage, wrap_exceptions=True, **timeouts)
    return MovingWindowRateLimiter(counts)


class Limiter(Protocol):
    def hit(self, item: RateLimitItem, *identifiers: str, cost: int = 1) -> bool: ...

    def get_window_stats(self, item: RateLimitItem, *identifiers: str) -> WindowStats: ...


class InProcessWindow:
    """The moving window counted in this process's memory (no REDIS_CACHE_URL: one process, the demo).

    What ``limits``' MovingWindowRateLimiter does in Redis, for one process. Not over ``limits``'
    own memory store (5.8): it is not safe for threads (two requests at once could start its
    expiry timer twice, and the second answered 500), and it expires entries on a timer thread it
    starts again at the first request after the last one ended, up to a hundred a second in a busy
    process. Locked against the race, each such start held every request thread of the process:
    12 ms at p99 with the CPU saturated (docs/scaling.md). Here each key keeps the times of its
    counted requests, oldest first; a request drops those out of the window and is counted if
    fewer than the limit remain. Microseconds under one lock, and no thread.

    The times are the monotonic clock's, not the wall clock's: a wall clock stepped forward (NTP
    catching up a drifted host) would end every count early and let a service through twice its
    limit, one stepped back would hold counts and refuse it for as long. (In Redis, where every
    process must agree on one clock, the window is timed by Redis's.) ``clock`` is for the tests.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._counted: dict[str, deque[float]] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def hit(self, item: RateLimitItem, *identifiers: str, cost: int = 1) -> bool:
        now = self._clock()
        with self._lock:
            counted = self._in_window(item, identifiers, now)
            if len(counted) + cost > item.amount:
                return False
            counted.extend([now] * cost)
            return True

    def get_window_stats(self, item: RateLimitItem, *identifiers: str) -> WindowStats:
        """When the oldest counted request leaves the window, and how many more it allows now."""
        now = self._clock()
        with self._lock:
            counted = self._in_window(item, identifiers, now)
            oldest = counted[0] if counted else now
            left = item.amount - len(counted)
        # WindowStats tells the reset in wall-clock seconds, as limits does (PerService.wait reads it so).
        return WindowStats(time.time() + (oldest + item.get_expiry() - now), left)

    def _in_window(self, item: RateLimitItem, identifiers: tuple[str, ...], now: float) -> deque[float]:
        counted = self._counted.setdefault(item.key_for(*identifiers), deque())
        while counted and counted[0] <= now - item.get_expiry():
            counted.popleft()
        return counted


@cache
def _item(rate: Rate) -> RateLimitItem:
    return RateLimitItemPerSecond(rate.limit, rate.seconds)
