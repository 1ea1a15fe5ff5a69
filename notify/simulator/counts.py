"""Count what the simulator accepted, per key: the evidence behind "no duplicates"."""

from collections import Counter
from typing import TypedDict


class Counts(TypedDict):
    """The JSON body of ``GET /simulator/counts``."""

    sms: dict[str, int]
    """Accepted messages per event id (the StatusCallback URL's last segment), else per sid."""
    email: dict[str, int]
    """Accepted messages per Message-ID header."""
    callbacks_sent: int
    """Callback requests that reached their target (any HTTP answer), copies and retries included."""
    sms_rejected: int
    """Create calls answered without accepting a message."""
    email_rejected: int
    """Messages answered with 4xx or 5xx after DATA."""


class Tally:
    """The running counters behind :class:`Counts`."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Start every counter again from zero."""
        self.sms: Counter[str] = Counter()
        self.email: Counter[str] = Counter()
        self.callbacks_sent = 0
        self.sms_rejected = 0
        self.email_rejected = 0

    def snapshot(self) -> Counts:
        """Return the counts as JSON-ready data."""
        return Counts(
            sms=dict(self.sms),
            email=dict(self.email),
            callbacks_sent=self.callbacks_sent,
            sms_rejected=self.sms_rejected,
            email_rejected=self.email_rejected,
        )
