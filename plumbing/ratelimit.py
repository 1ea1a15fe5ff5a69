"""Counting requests over moving windows: the API's rate limits and the failed attempts of logins and tokens.

Every count here is a moving window (at most the limit in any stretch of its period), kept in
``RATE_LIMIT_STORAGE``: in Redis when ``REDIS_CACHE_URL`` is set, so every web process counts
together, by the ``limits`` library timed by Redis's own clock (``plumbing.redis_window``); in this
process's memory otherwise (one process, the demo), by ``InProcessWindow``, timed by the
monotonic clock. Neither is judged by a host's wall clock: hosts that disagree on the time
(one a minute ahead, say) count into one window, and a clock stepped forward ends no count early.
"""

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from functools import cache
from typing import Any, Protocol

from django.conf import settings
from django.http import HttpRequest
from django.utils.crypto import salted_hmac
from limits import RateLimitItem, RateLimitItemPerSecond
from limits.strategies import MovingWindowRateLimiter
from limits.util import WindowStats

from plumbing.once import OncePerProcess
from plumbing.redis_window import ServerClockRedisStorage


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
    """Failures per identity (an address, an account) under the rate named by ``setting``.

    Counted as the API's requests are (``limiter_for``): with fixed windows keyed by each host's
    clock, hosts a window apart counted one client's failures under two keys, and a client fitted
    twice the limit into any boundary besides.
    """

    def __init__(self, scope: str, setting: str) -> None:
        self.scope = scope
        self.setting = setting

    def retry_after(self, identity: str) -> int | None:
        """Seconds until ``identity`` may try again (its oldest counted failure leaves the
        window), or None while it is under its limit."""
        stats = _limiter().get_window_stats(self._item(), self.scope, self._digest(identity))
        if stats.remaining > 0:
            return None
        return max(1, math.ceil(seconds_until_reset(stats)))

    def add(self, identity: str) -> None:
        # Past the limit a failure is not counted again: the window already refuses until its
        # oldest failure leaves it, and counting more would not make that sooner or later.
        _limiter().hit(self._item(), self.scope, self._digest(identity))

    def take(self, identity: str) -> bool:
        """Count an attempt by ``identity`` if its window has room for it; False, counting nothing, if not.

        One atomic step (the window's ``hit``), so that attempts counted before they are judged
        cannot exceed the limit however many run at once: asked first and counted after the
        check, every concurrent attempt found the same room.
        """
        return _limiter().hit(self._item(), self.scope, self._digest(identity))

    def give_back(self, identity: str) -> None:
        """Uncount one attempt ``take`` counted for ``identity`` (it turned out not to be a failure)."""
        _limiter().give_back(self._item(), self.scope, self._digest(identity))

    def clear(self, identity: str) -> None:
        """Forget ``identity``'s counted failures (an operator lifting a lock-out)."""
        _limiter().clear(self._item(), self.scope, self._digest(identity))

    def _item(self) -> RateLimitItem:
        # Read per call, not once at import: it is configuration, not code.
        return rate_item(getattr(settings, self.setting))

    def _digest(self, identity: str) -> str:
        # Keyed digest: keys (visible to anyone listing Redis) carry no address or user name,
        # and an IPv4 address cannot be recovered by hashing all 2^32 of them.
        return salted_hmac(f"ratelimit.{self.scope}", identity).hexdigest()[:32]


def seconds_until_reset(stats: WindowStats) -> float:
    """How long until the window's oldest count leaves it (a Retry-After), never negative.

    ``reset_time`` is in this host's wall-clock seconds whatever clock timed the window: Redis's
    is translated into them (``plumbing.redis_window``), the monotonic clock's too (``InProcessWindow``).
    """
    return max(0.0, float(stats.reset_time) - time.time())


def _limiter() -> "Limiter":
    return limiter_for(settings.RATE_LIMIT_STORAGE)


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
    return RedisWindow(counts)


class Limiter(Protocol):
    def hit(self, item: RateLimitItem, *identifiers: str, cost: int = 1) -> bool: ...

    def give_back(self, item: RateLimitItem, *identifiers: str) -> None:
        """Uncount the newest request counted (a ``hit`` that turned out not to count).

        The newest, not necessarily the caller's own: what the window judges by is how many it
        holds, and a request counted while the caller's was being judged, kept in its place, is
        older by at most that while: it leaves the window that much early, never late.
        """

    def get_window_stats(self, item: RateLimitItem, *identifiers: str) -> WindowStats: ...

    def clear(self, item: RateLimitItem, *identifiers: str) -> None: ...


class RedisWindow(MovingWindowRateLimiter):
    """``limits``' moving window over ``ServerClockRedisStorage``, which can also uncount a request."""

    storage: ServerClockRedisStorage

    def give_back(self, item: RateLimitItem, *identifiers: str) -> None:
        self.storage.remove_newest_entry(item.key_for(*identifiers))


class InProcessWindow:
    """The moving window counted in this process's memory (no REDIS_CACHE_URL: one process, the demo).

    What ``limits``' MovingWindowRateLimiter does in Redis, for one process. Not over ``limits``'
    own memory store (5.8): it is not safe for threads (two requests at once could start its
    expiry timer twice, and the second answered 500), and it expires entries on a timer thread it
    starts again at the first request after the last one ended, up to a hundred a second in a busy
    process. Locked against the race, each such start held every request thread of the process:
    12 ms at p99 with the CPU saturated (docs/scaling.md). Here each key keeps the times of its
    counted requests, oldest first; a request drops those out of the window and is counted if
    fewer than the limit remain. Microseconds under one lock, and no thread. Asking about a key
    stores nothing, and keys whose counts have all left their window are dropped whenever the
    keys have doubled since the last sweep: a client sending a new account name with every
    failed login grows the memory only by the names still inside their window.

    The times are the monotonic clock's, not the wall clock's: a wall clock stepped forward (NTP
    catching up a drifted host) would end every count early and let a service through twice its
    limit, one stepped back would hold counts and refuse it for as long. (In Redis, where every
    process must agree on one clock, the window is timed by Redis's.) ``clock`` is for the tests.
    """

    SWEEP_FROM = 1024  # keys kept before the first sweep

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        # Per key: its window's length and the times counted in it, oldest first.
        self._counted: dict[str, tuple[float, deque[float]]] = {}
        self._lock = threading.Lock()
        self._clock = clock
        self._sweep_at = self.SWEEP_FROM

    def hit(self, item: RateLimitItem, *identifiers: str, cost: int = 1) -> bool:
        now, key = self._clock(), item.key_for(*identifiers)
        with self._lock:
            counted = self._in_window(key, item.get_expiry(), now)
            if len(counted) + cost > item.amount:
                return False
            counted.extend([now] * cost)
            self._counted[key] = (item.get_expiry(), counted)
            if len(self._counted) >= self._sweep_at:
                self._sweep(now)
            return True

    def get_window_stats(self, item: RateLimitItem, *identifiers: str) -> WindowStats:
        """When the oldest counted request leaves the window, and how many more it allows now."""
        now = self._clock()
        with self._lock:
            counted = self._in_window(item.key_for(*identifiers), item.get_expiry(), now)
            oldest = counted[0] if counted else now
            left = item.amount - len(counted)
        # WindowStats tells the reset in wall-clock seconds, as limits does (PerService.wait reads it so).
        return WindowStats(time.time() + (oldest + item.get_expiry() - now), left)

    def give_back(self, item: RateLimitItem, *identifiers: str) -> None:
        key = item.key_for(*identifiers)
        with self._lock:
            _, counted = self._counted.get(key, (0.0, deque()))
            if counted:
                counted.pop()
            if not counted:
                self._counted.pop(key, None)

    def clear(self, item: RateLimitItem, *identifiers: str) -> None:
        with self._lock:
            self._counted.pop(item.key_for(*identifiers), None)

    def _in_window(self, key: str, expiry: float, now: float) -> deque[float]:
        """The times counted under ``key`` still in its window; an empty deque, not stored, for none."""
        _, counted = self._counted.get(key, (expiry, deque()))
        while counted and counted[0] <= now - expiry:
            counted.popleft()
        if not counted:
            self._counted.pop(key, None)
        return counted

    def _sweep(self, now: float) -> None:
        # Under the lock. Linear in the keys, and run only once they have doubled: constant per hit.
        for key in [key for key, (expiry, counted) in self._counted.items() if counted[-1] <= now - expiry]:
            del self._counted[key]
        self._sweep_at = max(self.SWEEP_FROM, 2 * len(self._counted))

    def __len__(self) -> int:
        """The keys kept (the tests' measure of its memory)."""
        return len(self._counted)


@cache
def rate_item(rate: Rate) -> RateLimitItem:
    return RateLimitItemPerSecond(rate.limit, rate.seconds)
