"""Hold what the PagerDuty stand-in keeps: the log of every message that arrived, its rate limit and its outage."""

import time
from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from typing import TypedDict

from simulator.pager_limit import RateLimit
from simulator.pager_outage import NO_OUTAGE, Outage, Phase

# The status logged for a message held without an answer and dropped (an outage's timeout):
# it got no HTTP status at all, and was not taken.
NO_ANSWER = 0


class PagerOutcome(StrEnum):
    """Why a message got the status it got."""

    ACCEPTED = "accepted"  # 202
    INVALID = "invalid"  # 400
    RATE_LIMITED = "rate_limited"  # 429: past PagerDuty's limit for its routing key
    # An outage's phase (``PagerFault``): no answer (status 0), 429, or a 5xx.
    TIMEOUT = "timeout"
    THROTTLE = "throttle"
    ERROR = "error"


class PagerLogEntry(TypedDict):
    """One message as it arrived, in ``GET /simulator/pager-log``."""

    action: str
    """``event_action`` as sent ("" if it was not a string)."""
    dedup_key: str
    """As sent, or as generated for a trigger without one ("" if it was not a string)."""
    at: str
    """Arrival time, UTC, ISO 8601."""
    status: int
    """The HTTP status it was answered with; 0 (``NO_ANSWER``): held past the client's deadline and dropped."""
    outcome: str
    """A ``PagerOutcome``."""


class PagerStandIn:
    """The Events v2 stand-in's state; the routing keys it sees are never kept or logged as given."""

    def __init__(self, clock: Callable[[], datetime], monotonic: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.monotonic = monotonic
        self.log: list[PagerLogEntry] = []
        self.limit = RateLimit()
        self.outage = NO_OUTAGE

    def start_outage(self, phases: tuple[Phase, ...]) -> None:
        """Follow ``phases`` from now on, replacing any outage in progress."""
        self.outage = Outage(phases, self.monotonic())

    def phase_now(self) -> Phase | None:
        return self.outage.phase_at(self.monotonic())

    def record(self, action: str, dedup_key: str, at: datetime, status: int, outcome: PagerOutcome) -> None:
        self.log.append(
            PagerLogEntry(action=action, dedup_key=dedup_key, at=at.isoformat(), status=status, outcome=outcome.value)
        )

    def reset(self) -> None:
        """Forget every message, the rate windows and any outage."""
        self.log.clear()
        self.limit.clear()
        self.outage = NO_OUTAGE
