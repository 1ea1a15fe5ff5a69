"""The de-identified timing format: one row per historical reset, no identifiers, no destinations.

See docs/replay.md. Reading validates every row and names the row and field of the
first problem; callers read the whole file once before acting on any of it.

Three versions, told apart by the header. Version 1 has one call per channel (its latency
measured from the first attempt to the final answer). Version 2 adds how the SMS's terminal
receipt came (``sms_receipt``: by callback or by a poll) and every call of each channel, each
with its own latency and answer (``sms_calls``, ``email_calls``), so a retry after a refusal is
replayed as the worker met it, not as one slow call. Version 3, written since, adds the policy's
template set the messages were worded from (``locale``: a locale key, or ``default``; never the
subscriber's own tag or time zone) and the segments the SMS went out as (``sms_segments``,
empty where unknown), so a region's cost per reset can be counted by language. All are read.
"""

import csv
import functools
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

HEADER_V1 = ["region", "lifetime_s", "sms_accept_s", "sms_terminal_s", "sms_outcome", "email_accept_s", "email_outcome"]
HEADER_V2 = [*HEADER_V1, "sms_receipt", "sms_calls", "email_calls"]
HEADER = [*HEADER_V2, "locale", "sms_segments"]
DEFAULT_LOCALE = "default"
SMS_OUTCOMES = ("delivered", "failed", "none")
EMAIL_OUTCOMES = ("accepted", "failed")
# How the terminal receipt reached us: a callback comes at its time whatever the polling; a
# receipt a poll found (its callback lost) is found again only by a poll at or after that time.
RECEIPTS = ("callback", "poll")
# A record that does not say how its receipt came (version 1, or no receipt at all): by callback.
DEFAULT_RECEIPT = RECEIPTS[0]
# What a call's answer was. SMS: accepted (the message exists from then on), transient (refused,
# nothing sent), failed (refused for good), unknown (timed out, and no message ever appeared).
# Email: accepted, failed, transient (deferred), unknown (the answer was lost).
SMS_ANSWERS = ("accepted", "transient", "failed", "unknown")
EMAIL_ANSWERS = ("accepted", "failed", "transient", "unknown")


# What a field an older version lacks stands for, where not empty.
_OMITTED = {"sms_receipt": DEFAULT_RECEIPT}


class TimingError(ValueError):
    """A timing file that cannot be replayed; the message names the row and field."""


class Call(NamedTuple):
    """One attempt's call to a provider: how long until its answer, and what the answer was."""

    latency_s: float
    answer: str


class Timing(NamedTuple):
    """One historical reset. A NamedTuple, not a dataclass: a replay reads a million of these,
    and a frozen dataclass's ``__init__`` (each field set through ``object.__setattr__``) cost
    as much as parsing the row."""

    region: str
    lifetime_s: float
    sms_accept_s: float
    sms_terminal_s: float | None  # None: no terminal receipt ever came; else from the accepted call's start
    sms_outcome: str
    email_accept_s: float
    email_outcome: str
    sms_receipt: str = DEFAULT_RECEIPT
    # Every call in the order made; empty (version 1): one call, the summary fields above.
    # A replay that makes more calls than history did repeats the last one's answer
    # (runbook.replay.simulate._answer).
    sms_calls: tuple[Call, ...] = ()
    email_calls: tuple[Call, ...] = ()
    locale: str = DEFAULT_LOCALE
    sms_segments: int | None = None  # None: not recorded (versions 1 and 2, or never sent)


def read(path: Path, *, regions: Iterable[str] | None = None) -> Iterator[Timing]:
    """Yield the file's records, refusing the first bad one with its row number (the header is row 1)."""
    known = set(regions) if regions is not None else None
    with path.open(newline="", encoding="utf-8") as file:
        reader = csv.reader(file)
        header = next(reader, None)
        if header not in (HEADER, HEADER_V2, HEADER_V1):
            missing = [name for name in HEADER if name not in (header or [])]
            detail = (
                f"missing columns: {', '.join(missing)}" if missing else f"columns must be exactly {','.join(HEADER)}"
            )
            raise TimingError(f"{path}: row 1 (header): {detail}")
        # An older version's row is read as the current one with its later fields as that
        # version meant them: a receipt by callback (version 1 knew no other), the rest empty.
        width, padding = len(header), [_OMITTED.get(name, "") for name in HEADER[len(header) :]]
        for number, row in enumerate(reader, start=2):
            if len(row) != width:
                raise TimingError(f"row {number}: expected {width} fields, found {len(row)}")
            yield _parse(row + padding if padding else row, number, known)


def _parse(row: list[str], number: int, known: set[str] | None) -> Timing:
    """One row of the current version's width. Fields by position (the header was checked)."""
    (
        region,
        lifetime,
        accept,
        terminal,
        sms_outcome,
        email_accept,
        email_outcome,
        receipt,
        sms,
        email,
        locale,
        segments,
    ) = (field.strip() for field in row)
    if not region or (known is not None and region not in known):
        raise TimingError(f"row {number}: region {region!r} has no delivery policy")
    if sms_outcome not in SMS_OUTCOMES:
        raise TimingError(f"row {number}: sms_outcome must be one of {', '.join(SMS_OUTCOMES)}, got {sms_outcome!r}")
    if email_outcome not in EMAIL_OUTCOMES:
        raise TimingError(
            f"row {number}: email_outcome must be one of {', '.join(EMAIL_OUTCOMES)}, got {email_outcome!r}"
        )
    if (terminal == "") != (sms_outcome == "none"):
        raise TimingError(f"row {number}: sms_terminal_s must be empty exactly when sms_outcome is none")
    if receipt not in (RECEIPTS if terminal else ("", *RECEIPTS)):
        raise TimingError(f"row {number}: sms_receipt must be one of {', '.join(RECEIPTS)}, got {receipt!r}")
    timing = Timing(
        region,
        _seconds(lifetime, "lifetime_s", number),
        _seconds(accept, "sms_accept_s", number),
        _seconds(terminal, "sms_terminal_s", number) if terminal else None,
        sms_outcome,
        _seconds(email_accept, "email_accept_s", number),
        email_outcome,
        receipt or DEFAULT_RECEIPT,
        _calls(sms, "sms_calls", SMS_ANSWERS, number) if sms else (),
        _calls(email, "email_calls", EMAIL_ANSWERS, number) if email else (),
        _locale(locale, number) if locale else DEFAULT_LOCALE,
        _segments(segments, number) if segments else None,
    )
    if timing.lifetime_s <= 0:
        raise TimingError(f"row {number}: lifetime_s must be positive, got {timing.lifetime_s:g}")
    return timing


@functools.lru_cache(maxsize=256)
def _is_locale_key(locale: str) -> bool:
    # Cached: a file holds a handful of distinct locales, each checked once, not once per row
    # (bounded: a file of made-up locales must not grow the process).
    return len(locale) <= 35 and all(part.isalnum() for part in locale.split("-"))


def _locale(raw: str, number: int) -> str:
    if not _is_locale_key(raw):
        raise TimingError(f"row {number}: locale must be a locale key (de, zh-Hant) or default, got {raw!r}")
    return raw


def _segments(raw: str, number: int) -> int:
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
        raise TimingError(f"row {number}: sms_segments must be a positive whole number, got {raw!r}")
    return int(raw)


def _seconds(raw: str, field: str, number: int) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise TimingError(f"row {number}: {field} must be a number of seconds, got {raw!r}") from None
    if not 0 <= value < math.inf:  # NaN compares false: refused with the negatives and infinity
        raise TimingError(f"row {number}: {field} must be a non-negative number of seconds, got {raw!r}")
    return value


def _calls(raw: str, field: str, answers: tuple[str, ...], number: int) -> tuple[Call, ...]:
    """``0.41:transient;1.2:accepted``: each call's latency and answer, in order."""
    calls = []
    for item in filter(None, raw.split(";")):
        latency, _, answer = item.strip().partition(":")
        if answer not in answers:
            raise TimingError(f"row {number}: {field} answers must be one of {', '.join(answers)}, got {item!r}")
        calls.append(Call(_seconds(latency.strip(), field, number), answer))
    return tuple(calls)


def write(path: Path, timings: Iterable[Timing]) -> int:
    """Write records in the format, all or nothing (a failure leaves no half file); return how many."""
    count = 0
    partial = path.with_name(f".{path.name}.partial")
    with partial.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(HEADER)
        for timing in timings:
            writer.writerow(
                [
                    timing.region,
                    _decimal(timing.lifetime_s),
                    _decimal(timing.sms_accept_s),
                    "" if timing.sms_terminal_s is None else _decimal(timing.sms_terminal_s),
                    timing.sms_outcome,
                    _decimal(timing.email_accept_s),
                    timing.email_outcome,
                    timing.sms_receipt if timing.sms_terminal_s is not None else "",
                    _joined(timing.sms_calls),
                    _joined(timing.email_calls),
                    timing.locale,
                    "" if timing.sms_segments is None else timing.sms_segments,
                ]
            )
            count += 1
    partial.replace(path)
    return count


def _joined(calls: tuple[Call, ...]) -> str:
    return ";".join(f"{_decimal(call.latency_s)}:{call.answer}" for call in calls)


def _decimal(seconds: float) -> str:
    return f"{seconds:.3f}".rstrip("0").rstrip(".") or "0"
