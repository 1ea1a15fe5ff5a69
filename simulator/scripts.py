"""Parse the scripts that pin the behaviour of future messages to one destination.

A script never injects a fault it does not name: an omitted ``create`` or ``smtp`` means
"accept", an omitted ``callbacks`` means "normal". Omitted timings (``statuses``,
``callback_delay``, ``hang_seconds``) come from the profile.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from simulator.faults import CallbackFault, CreateFault, SmtpFault
from simulator.fields import Fields, as_number
from simulator.messages import TIMELINE_STATUSES, StatusChange

T = TypeVar("T")


class ScriptError(ValueError):
    """A script the simulator refuses; the message names the offending field."""


@dataclass(frozen=True)
class SmsScript:
    """How create calls to ``to`` behave, one ``create`` step per call."""

    to: str
    create: tuple[CreateFault, ...] = (CreateFault.ACCEPT,)
    statuses: tuple[StatusChange, ...] | None = None
    callbacks: CallbackFault = CallbackFault.NORMAL
    callback_delay: float | None = None
    hang_seconds: float | None = None


@dataclass(frozen=True)
class EmailScript:
    """How messages to ``address`` are answered, one ``smtp`` step per message."""

    address: str
    smtp: tuple[SmtpFault, ...] = (SmtpFault.ACCEPT,)
    hang_seconds: float | None = None


def step(steps: Sequence[T], calls_before: int) -> T:
    """Return the step for the next call: one per call, the last one repeating."""
    return steps[min(calls_before, len(steps) - 1)]


def parse_script(data: object) -> SmsScript | EmailScript:
    """Validate a script posted as JSON."""
    fields = Fields(data, "", ScriptError)
    if fields.has("to") == fields.has("email"):
        raise ScriptError('a script names exactly one destination: "to" (SMS) or "email"')
    script = _sms_script(fields) if fields.has("to") else _email_script(fields)
    fields.finish()
    return script


def _sms_script(fields: Fields) -> SmsScript:
    return SmsScript(
        to=fields.string("to"),
        create=fields.choices("create", CreateFault) if fields.has("create") else SmsScript.create,
        statuses=_statuses(fields) if fields.has("statuses") else None,
        callbacks=fields.choice("callbacks", CallbackFault) if fields.has("callbacks") else SmsScript.callbacks,
        callback_delay=fields.non_negative("callback_delay") if fields.has("callback_delay") else None,
        hang_seconds=fields.non_negative("hang_seconds") if fields.has("hang_seconds") else None,
    )


def _email_script(fields: Fields) -> EmailScript:
    return EmailScript(
        address=fields.string("email"),
        smtp=fields.choices("smtp", SmtpFault) if fields.has("smtp") else EmailScript.smtp,
        hang_seconds=fields.non_negative("hang_seconds") if fields.has("hang_seconds") else None,
    )


def _statuses(fields: Fields) -> tuple[StatusChange, ...]:
    """Read ``[[status, seconds after creation], ...]``, in time order (empty: no receipt ever)."""
    raw = fields.pop("statuses")
    if not isinstance(raw, list):
        raise fields.fail("statuses", "must be a list of [status, seconds] pairs")
    changes: list[StatusChange] = []
    for index, pair in enumerate(raw):
        path = fields.field(f"statuses[{index}]")
        if not isinstance(pair, list) or len(pair) != 2:
            raise ScriptError(f"{path}: must be a [status, seconds] pair")
        status, seconds = pair[0], as_number(pair[1], path, ScriptError)
        if not isinstance(status, str) or status not in TIMELINE_STATUSES:
            raise ScriptError(f"{path}: {status!r} is not one of {', '.join(sorted(TIMELINE_STATUSES))}")
        if seconds < 0 or (changes and seconds < changes[-1].after_seconds):
            raise ScriptError(f"{path}: seconds must not be negative nor earlier than the previous status")
        changes.append(StatusChange(status, seconds))
    return tuple(changes)
