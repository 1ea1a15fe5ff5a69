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
    sms_accepted_late: int
    """Messages created only after their create call was held past the client's patience."""
    smtp_paced_connections: int
    """SMTP connections that answered every reply slowly."""
    smtp_connections: int
    """SMTP connections opened by clients."""
    sms_api_connections: int
    """Client connections (distinct client address and port) the SMS API was called over."""


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
        self.sms_accepted_late = 0
        self.smtp_paced_connections = 0
        self.smtp_connections = 0
        self.sms_api_peers: set[str] = set()

    def snapshot(self) -> Counts:
        """Return the counts as JSON-ready data."""
        return Counts(
            sms=dict(self.sms),
            email=dict(self.email),
            callbacks_sent=self.callbacks_sent,
            sms_rejected=self.sms_rejected,
            email_rejected=self.email_rejected,
            sms_accepted_late=self.sms_accepted_late,
            smtp_paced_connections=self.smtp_paced_connections,
            smtp_connections=self.smtp_connections,
            sms_api_connections=len(self.sms_api_peers),
        )
