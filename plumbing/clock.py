"""The time sources. Domain functions take ``now`` explicitly; callers get it from a clock.

Hosts disagree about the time; the database is one. Every deadline is judged on the
database's clock, so a worker host whose wall clock is off neither steals a live lease,
nor keeps an expired one, nor claims a fallback early:

- leases and settle times are computed *inside* the statements that take, renew, check
  and release them (``notify.writes``), from the database's own clock;
- everything else a process decides (the fallback deadline D, expiry, due times, act_by)
  uses ``database_clock``: this process's monotonic clock anchored to the database's time,
  re-measured at every worker step (the event read carries the database's time) and at
  least every ``REMEASURE_AFTER`` otherwise. Each measurement's offset from the host's wall
  clock is reported (``plumbing.clockwatch``) and alerted on.

``NOTIFY_CLOCK=system`` makes this host's clock the judge of everything instead, its
reading passed into the statements (``pinned``): for a single-host set-up, and for tests
that freeze time. Tests that drive the worker pass a ``FakeClock``, which likewise stands
for the database's clock.
"""

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

from django.conf import settings
from django.db import connection

from plumbing import clockwatch


class Clock(Protocol):
    def now(self) -> datetime: ...

    def pinned(self) -> datetime | None:
        """Return the time statements must judge leases by: a test clock's own, or None for the database's."""
        ...

    def sync(self, database_time: datetime, sent: float, received: float) -> None:
        """Take the database's time as read by a query sent and answered at these monotonic instants."""
        ...


class SystemClock:
    """This host's wall clock, shifted by ``NOTIFY_CLOCK_OFFSET`` (test runs play a host whose clock is wrong).

    Where it is the configured clock it is also the judge of leases: statements take its reading.
    """

    def now(self) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=settings.NOTIFY_CLOCK_OFFSET)

    def pinned(self) -> datetime | None:
        return self.now()

    def sync(self, database_time: datetime, sent: float, received: float) -> None:
        return None


# A measurement older than this is taken again before the clock is read. Between two,
# the monotonic clock carries the time on; it drifts by parts per million, not seconds.
REMEASURE_AFTER = 10.0

_DATABASE_NOW = {
    "postgresql": "SELECT statement_timestamp()",
    "sqlite": "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')",
}


def parse_database_time(value: datetime | str) -> datetime:
    """Return the database's reading of its clock as an aware datetime (SQLite answers with naive UTC text)."""
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class DatabaseClock:
    """The database's time, estimated from the monotonic clock and the last measurement."""

    def __init__(self, local: SystemClock) -> None:
        self._local = local
        self._anchor: tuple[datetime, float] | None = None

    def now(self) -> datetime:
        if self._anchor is None or time.monotonic() - self._anchor[1] > REMEASURE_AFTER:
            self._measure()
        assert self._anchor is not None
        database_time, at = self._anchor
        return database_time + timedelta(seconds=time.monotonic() - at)

    def pinned(self) -> datetime | None:
        return None

    def sync(self, database_time: datetime, sent: float, received: float) -> None:
        # The database read its clock somewhere between send and answer: the midpoint is off
        # by at most half the round trip (well under a millisecond on a local network).
        midpoint = (sent + received) / 2
        self._anchor = (database_time, midpoint)
        local_then = self._local.now() - timedelta(seconds=time.monotonic() - midpoint)
        clockwatch.report((local_then - database_time).total_seconds())

    def _measure(self) -> None:
        sent = time.monotonic()
        with connection.cursor() as cursor:
            cursor.execute(_DATABASE_NOW[connection.vendor])
            (value,) = cursor.fetchone()
        self.sync(parse_database_time(value), sent, time.monotonic())


class FakeClock:
    """A clock that moves only when told to; it stands for the database's clock too."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("FakeClock needs an aware datetime")
        self._now = start

    def now(self) -> datetime:
        return self._now

    def pinned(self) -> datetime | None:
        return self._now

    def sync(self, database_time: datetime, sent: float, received: float) -> None:
        return None

    def advance(self, seconds: float) -> datetime:
        self._now += timedelta(seconds=seconds)
        return self._now


system_clock = SystemClock()
database_clock = DatabaseClock(system_clock)


def current_clock() -> Clock:
    """Return the clock production code judges time by (``NOTIFY_CLOCK``: the database's by default)."""
    return database_clock if settings.NOTIFY_CLOCK == "database" else system_clock
