"""The narrow interface every transport adapter implements, and its typed errors.

Adapters map raw provider statuses to ``Normalized`` here, at the boundary; the
raw word travels along on the ``Receipt`` as evidence and never drives a decision.
"""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from django.core.mail import EmailMessage

from notify.states import Normalized


class TransportError(Exception):
    """A provider call that did not yield a receipt. ``raw_status`` names what happened, without personal data."""

    def __init__(self, raw_status: str, detail: str = "") -> None:
        super().__init__(f"{raw_status}: {detail}" if detail else raw_status)
        self.raw_status = raw_status


class TransientError(TransportError):
    """Nothing was sent (refused before acceptance, or the provider is busy): retry later with the same key."""


class PermanentError(TransportError):
    """The provider refused this message for good: a terminal failure of the channel."""


class UnknownOutcome(TransportError):
    """The provider may have accepted the message: recover (look it up) before any resubmit."""


@dataclass(frozen=True)
class Receipt:
    """What the provider said about one message."""

    normalized: Normalized
    raw_status: str
    provider_ref: str = ""
    provider_time: datetime | None = None


@dataclass(frozen=True)
class SmsMessage:
    """One SMS to send. Holds personal data: never logged (hidden from ``repr``)."""

    to: str = field(repr=False)
    sender: str = field(repr=False)
    body: str = field(repr=False)
    status_callback: str
    # What identifies this message among all sent to ``to``: its event's own reset link,
    # which the body carries. Recovery matches on it (Twilio takes no idempotency key).
    reference: str = field(repr=False, default="")


class SmsTransport(Protocol):
    def submit(self, message: SmsMessage) -> Receipt:
        """Send ``message``; return the acceptance receipt or raise a ``TransportError``."""
        ...

    def fetch(self, provider_ref: str) -> Receipt:
        """Return the message's current status (polling); raise ``TransientError`` if unreachable."""
        ...

    def find(self, message: SmsMessage, since: datetime) -> Receipt | None:
        """Return this message's receipt if the provider has it, ``None`` if provably absent.

        Raises ``UnknownOutcome`` when absence cannot be proven (lookup failed, too many
        candidates): the caller must not resubmit then.
        """
        ...


class EmailTransport(Protocol):
    def send(self, message: EmailMessage) -> Receipt:
        """Hand ``message`` to the mail server; return its acceptance or raise a ``TransportError``."""
        ...
