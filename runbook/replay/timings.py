"""The de-identified timing format: one row per historical reset, no identifiers, no destinations.

See docs/replay.md. Reading validates every row and names the row and field of the
first problem; callers read the whole file once before acting on any of it.
"""

import csv
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

HEADER = ["region", "lifetime_s", "sms_accept_s", "sms_terminal_s", "sms_outcome", "email_accept_s", "email_outcome"]
SMS_OUTCOMES = ("delivered", "failed", "none")
EMAIL_OUTCOMES = ("accepted", "failed")


class TimingError(ValueError):
    """A timing file that cannot be replayed; the message names the row and field."""


@dataclass(frozen=True, slots=True)
class Timing:
    region: str
    lifetime_s: float
    sms_accept_s: float
    sms_terminal_s: float | None  # None: no terminal receipt ever came
    sms_outcome: str
    email_accept_s: float
    email_outcome: str


def read(path: Path, *, regions: Iterable[str] | None = None) -> Iterator[Timing]:
    """Yield the file's records, refusing the first bad one with its row number (the header is row 1)."""
    known = set(regions) if regions is not None else None
    with path.open(newline="", encoding="utf-8") as file:
        reader = csv.reader(file)
        header = next(reader, None)
        if header != HEADER:
            missing = [name for name in HEADER if name not in (header or [])]
            detail = (
                f"missing columns: {', '.join(missing)}" if missing else f"columns must be exactly {','.join(HEADER)}"
            )
            raise TimingError(f"{path}: row 1 (header): {detail}")
        for number, row in enumerate(reader, start=2):
            yield _parse(row, number, known)


def _parse(row: list[str], number: int, known: set[str] | None) -> Timing:
    if len(row) != len(HEADER):
        raise TimingError(f"row {number}: expected {len(HEADER)} fields, found {len(row)}")
    values = dict(zip(HEADER, row, strict=True))
    region = values["region"].strip()
    if not region or (known is not None and region not in known):
        raise TimingError(f"row {number}: region {region!r} has no delivery policy")
    sms_outcome = values["sms_outcome"].strip()
    if sms_outcome not in SMS_OUTCOMES:
        raise TimingError(f"row {number}: sms_outcome must be one of {', '.join(SMS_OUTCOMES)}, got {sms_outcome!r}")
    email_outcome = values["email_outcome"].strip()
    if email_outcome not in EMAIL_OUTCOMES:
        raise TimingError(
            f"row {number}: email_outcome must be one of {', '.join(EMAIL_OUTCOMES)}, got {email_outcome!r}"
        )
    terminal = values["sms_terminal_s"].strip()
    if (terminal == "") != (sms_outcome == "none"):
        raise TimingError(f"row {number}: sms_terminal_s must be empty exactly when sms_outcome is none")
    timing = Timing(
        region=region,
        lifetime_s=_seconds(values, "lifetime_s", number),
        sms_accept_s=_seconds(values, "sms_accept_s", number),
        sms_terminal_s=_seconds(values, "sms_terminal_s", number) if terminal else None,
        sms_outcome=sms_outcome,
        email_accept_s=_seconds(values, "email_accept_s", number),
        email_outcome=email_outcome,
    )
    if timing.lifetime_s <= 0:
        raise TimingError(f"row {number}: lifetime_s must be positive, got {timing.lifetime_s:g}")
    return timing


def _seconds(values: dict[str, str], field: str, number: int) -> float:
    raw = values[field].strip()
    try:
        value = float(raw)
    except ValueError:
        raise TimingError(f"row {number}: {field} must be a number of seconds, got {raw!r}") from None
    if not math.isfinite(value) or value < 0:
        raise TimingError(f"row {number}: {field} must be a non-negative number of seconds, got {raw!r}")
    return value


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
                ]
            )
            count += 1
    partial.replace(path)
    return count


def _decimal(seconds: float) -> str:
    return f"{seconds:.3f}".rstrip("0").rstrip(".") or "0"
