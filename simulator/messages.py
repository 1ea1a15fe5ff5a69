"""Hold one simulated SMS and answer "what is its status now" from its timeline."""

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

# Statuses a timeline may move through after the initial queued/accepted.
TIMELINE_STATUSES = frozenset({"sending", "sent", "delivered", "read", "undelivered", "failed"})
# Statuses that mean the message left the provider, so it has a date_sent.
_SENT = frozenset({"sent", "delivered", "read", "undelivered"})
_ERRORS = {
    "undelivered": (30003, "Unreachable destination handset"),
    "failed": (30008, "Unknown error"),
}
# GSM-7 packs 160 characters in one segment, 153 per part when concatenated; UCS-2 70 and 67.
# ASCII stands in for the GSM-7 alphabet: close enough for a segment count.
_SEGMENT = {True: (160, 153), False: (70, 67)}


@dataclass(frozen=True)
class StatusChange:
    """One status a message reaches, ``after_seconds`` after its creation."""

    status: str
    after_seconds: float

    @property
    def error(self) -> tuple[int, str] | None:
        """Return the Twilio error code and message that go with a failed status."""
        return _ERRORS.get(self.status)


@dataclass(frozen=True)
class SmsMessage:
    """An accepted message with its whole future decided at creation."""

    sid: str
    to: str
    from_: str | None
    body: str
    messaging_service_sid: str | None
    status_callback: str | None
    created_at: datetime
    timeline: tuple[StatusChange, ...]
    # False when the create asked for ContentRetention=discard: the body is never shown.
    retains_content: bool = True

    @property
    def key(self) -> str:
        """Return the counting key: the last segment of the callback URL (the event id), else the sid."""
        if self.status_callback:
            segments = [segment for segment in urlsplit(self.status_callback).path.split("/") if segment]
            if segments:
                return segments[-1]
        return self.sid

    @property
    def initial(self) -> StatusChange:
        # A messaging service accepts first and picks a sender later; a direct send is queued.
        return StatusChange("accepted" if self.messaging_service_sid else "queued", 0.0)

    def at(self, change: StatusChange) -> datetime:
        """Return the wall-clock time of ``change``."""
        return self.created_at + timedelta(seconds=change.after_seconds)

    def current(self, now: datetime) -> StatusChange:
        """Return the latest status whose time has come."""
        reached = [change for change in self.timeline if self.at(change) <= now]
        return reached[-1] if reached else self.initial

    def date_sent(self, now: datetime) -> datetime | None:
        """Return when the message left the provider, if it has by ``now``."""
        sent = [self.at(change) for change in self.timeline if change.status in _SENT and self.at(change) <= now]
        return sent[0] if sent else None

    @property
    def num_segments(self) -> int:
        single, part = _SEGMENT[self.body.isascii()]
        return 1 if len(self.body) <= single else -(-len(self.body) // part)


def new_sid(rng: random.Random, prefix: str) -> str:
    """Return a Twilio-shaped identifier: a two-letter prefix and 32 hex digits."""
    return f"{prefix}{rng.getrandbits(128):032x}"
