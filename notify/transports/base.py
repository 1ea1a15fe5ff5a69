"""The narrow interface every transport adapter implements, and its typed errors.

Adapters map raw provider statuses to ``Normalized`` here, at the boundary; the
raw word travels along on the ``Receipt`` as evidence and never drives a decision.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from django.core.mail import EmailMessage

from notify.rules.vocabulary import Normalized


class TransportError(Exception):
    """A provider call that did not yield a receipt. ``raw_status`` names what happened, without personal data."""

    def __init__(self, raw_status: str, detail: str = "") -> None:
        super().__init__(f"{raw_status}: {detail}" if detail else raw_status)
        self.raw_status = raw_status


class TransientError(TransportError):
    """Nothing was sent (refused before acceptance, or the provider is busy): retry later with the same key."""


class ConfigurationError(TransportError):
    """The provider refused our account or credentials: nothing was sent, and no retry helps
    until an operator fixes the configuration. Not the recipient's failure, not a passing one."""


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
    # Ask the provider to keep no copy of the body (Twilio's ContentRetention=discard).
    discard_content: bool = False


@dataclass(frozen=True)
class Neighbours:
    """Our other messages to the same destination that a lookup's window may also list.

    ``sids``: those whose provider id we hold (they are not this event's); ``unidentified``:
    those we may have sent without learning their id. Where bodies are redacted, a listed
    message can be told to be this event's only when nothing else of ours could be it, and
    nothing of anyone else's either (a sender the deployment declares exclusive).
    """

    sids: frozenset[str] = frozenset()
    unidentified: int = 0


class SmsTransport(Protocol):
    # Every call ends within one deadline over its whole exchange (``call_bound("sms")``):
    # past it the connection is cut and the call raises, typed by whether the request went out.
    #
    # How long after a submit began its message may still be missing from the provider's
    # list (the provider may go on processing a request our client gave up on). A lookup's
    # "not found" proves absence only for a submit that began at least this long ago, plus
    # our own call's bound; before it the caller looks again, and never resubmits.
    absence_horizon: timedelta

    def submit(self, message: SmsMessage) -> Receipt:
        """Send ``message``; return the acceptance receipt or raise a ``TransportError``."""
        ...

    def fetch(self, provider_ref: str) -> Receipt:
        """Return the message's current status (polling); raise ``TransientError`` if unreachable."""
        ...

    def find(self, message: SmsMessage, since: datetime, neighbours: Neighbours) -> Receipt | None:
        """Return this message's receipt if the provider lists it, ``None`` if its list has no such message now.

        ``None`` proves absence only past ``absence_horizon`` (see above). Raises
        ``UnknownOutcome`` when the list cannot tell: the lookup failed, the window holds
        more than one list page, or a redacted body leaves a message that could be this
        one or another's (ours, or anyone's from a sender not declared exclusive). The
        caller must not resubmit then.
        """
        ...


class EmailTransport(Protocol):
    def send(self, message: EmailMessage, *, within: timedelta) -> Receipt:
        """Hand ``message`` to the mail server; return its acceptance or raise a ``TransportError``.

        The whole exchange (name lookup, connection, greeting, TLS, every command and reply)
        ends within ``within``: past it the connection is cut, and the outcome is unknown only
        if the message's final dot had been sent.
        """
        ...
