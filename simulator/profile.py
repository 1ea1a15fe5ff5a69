"""Load and validate a simulator profile: per-region SMS behaviour and SMTP fault rates (TOML).

A profile is data, never code: regions are picked by destination prefix (longest match wins,
``[sms.fallback]`` otherwise) and every field is checked on load, so a typo fails at start-up
with the field's dotted path instead of silently changing a chaos run.
"""

import math
import random
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

from simulator.faults import CallbackFault, CreateFault, FinalStatus, SmtpFault
from simulator.fields import Fields

DEFAULT_PROFILE = Path(__file__).parent / "profiles" / "default.toml"

_PREFIX = re.compile(r"\+\d{1,6}")

E = TypeVar("E", bound=StrEnum)


class ProfileError(ValueError):
    """A profile that cannot be used; the message names the offending field."""


@dataclass(frozen=True)
class Latency:
    """A lognormal delay, described by its median (seconds) and the sigma of its logarithm."""

    median_seconds: float
    sigma: float

    def draw(self, rng: random.Random) -> float:
        """Return one delay in seconds."""
        return rng.lognormvariate(math.log(self.median_seconds), self.sigma)


@dataclass(frozen=True)
class SmsRegion:
    """How messages to one group of destination prefixes behave."""

    name: str
    prefixes: tuple[str, ...]
    sent_latency: Latency
    receipt_latency: Latency
    """Measured from ``sent``, not from creation."""
    outcomes: Mapping[FinalStatus, float]
    create_faults: Mapping[CreateFault, float]
    hang_seconds: float
    callback_faults: Mapping[CallbackFault, float]
    callback_delay_seconds: float


@dataclass(frozen=True)
class SmtpProfile:
    """How the SMTP sink answers messages whose recipients have no script."""

    faults: Mapping[SmtpFault, float]
    hang_seconds: float


@dataclass(frozen=True)
class Profile:
    """Everything the simulator draws from when a destination is not scripted."""

    fallback: SmsRegion
    regions: tuple[SmsRegion, ...]
    smtp: SmtpProfile

    def region_for(self, to: str) -> SmsRegion:
        """Return the region with the longest prefix of ``to``, or the fallback."""
        matches = [(len(p), region) for region in self.regions for p in region.prefixes if to.startswith(p)]
        return max(matches, key=lambda match: match[0])[1] if matches else self.fallback


def pick(rng: random.Random, weights: Mapping[E, float]) -> E:
    """Return one key of ``weights``, drawn in proportion to its weight."""
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def load_profile(path: Path) -> Profile:
    """Read and validate the TOML profile at ``path``."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProfileError(f"{path}: {exc}") from exc
    return parse_profile(data)


def parse_profile(data: Mapping[str, object]) -> Profile:
    """Validate an already-parsed profile document."""
    root = Fields(data, "", ProfileError)
    sms = root.table("sms")
    fallback = _region(sms.table("fallback"), "fallback", has_prefixes=False)
    regions_table = sms.table("regions")
    regions = tuple(_region(regions_table.table(name), name) for name in regions_table.names())
    sms.finish()
    _check_prefixes_unique(regions)
    smtp_table = root.table("smtp")
    smtp = SmtpProfile(
        faults=_fault_probabilities(smtp_table.table("faults"), SmtpFault, no_fault=SmtpFault.ACCEPT),
        hang_seconds=smtp_table.positive("hang_seconds"),
    )
    smtp_table.finish()
    root.finish()
    return Profile(fallback=fallback, regions=regions, smtp=smtp)


def _region(table: Fields, name: str, *, has_prefixes: bool = True) -> SmsRegion:
    region = SmsRegion(
        name=name,
        prefixes=_prefixes(table) if has_prefixes else (),
        sent_latency=_latency(table.table("sent_latency")),
        receipt_latency=_latency(table.table("receipt_latency")),
        outcomes=_outcome_weights(table.table("outcomes")),
        create_faults=_fault_probabilities(table.table("create_faults"), CreateFault, no_fault=CreateFault.ACCEPT),
        hang_seconds=table.positive("hang_seconds"),
        callback_faults=_fault_probabilities(
            table.table("callback_faults"), CallbackFault, no_fault=CallbackFault.NORMAL
        ),
        callback_delay_seconds=table.positive("callback_delay_seconds"),
    )
    table.finish()
    return region


def _prefixes(table: Fields) -> tuple[str, ...]:
    raw = table.pop("prefixes")
    if not isinstance(raw, list) or not raw:
        raise table.fail("prefixes", 'must be a non-empty list of prefixes like "+44"')
    for prefix in raw:
        if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
            raise table.fail("prefixes", f'{prefix!r} is not a prefix like "+44"')
    return tuple(raw)


def _check_prefixes_unique(regions: tuple[SmsRegion, ...]) -> None:
    owners: dict[str, str] = {}
    for region in regions:
        for prefix in region.prefixes:
            if prefix in owners:
                raise ProfileError(f"sms.regions.{region.name}.prefixes: {prefix} is also in {owners[prefix]}")
            owners[prefix] = region.name


def _latency(table: Fields) -> Latency:
    latency = Latency(median_seconds=table.positive("median_seconds"), sigma=table.non_negative("sigma"))
    table.finish()
    return latency


def _outcome_weights(table: Fields) -> dict[FinalStatus, float]:
    weights = {outcome: table.non_negative(outcome.value, default=0.0) for outcome in FinalStatus}
    table.finish()
    if not any(weights.values()):
        raise ProfileError(f"{table.path}: at least one weight must be positive")
    return weights


def _fault_probabilities(table: Fields, faults: type[E], *, no_fault: E) -> dict[E, float]:
    """Read each fault's probability; the fault-free behaviour gets what is left."""
    probabilities: dict[E, float] = {}
    for fault in faults:
        if fault is no_fault:
            continue
        probability = table.non_negative(fault.value, default=0.0)
        if probability > 1:
            raise table.fail(fault.value, f"must be a probability in [0, 1], got {probability:g}")
        probabilities[fault] = probability
    table.finish()
    total = sum(probabilities.values())
    if total > 1:
        raise ProfileError(f"{table.path}: probabilities add up to {total:g}, more than 1")
    return {no_fault: 1 - total, **probabilities}
