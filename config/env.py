"""Strict parsing of settings from environment variables.

Every helper raises ``ImproperlyConfigured`` naming the variable when its value
cannot be parsed, so a typo fails at start-up instead of at 3 a.m.
"""

import os
import re
from collections.abc import Callable
from typing import NamedTuple, TypeVar

from django.core.exceptions import ImproperlyConfigured

T = TypeVar("T")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _parse(name: str, default: T, parse: Callable[[str], T], expected: str) -> T:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return parse(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be {expected}, got {raw!r}") from None


def env_str(name: str, default: str = "") -> str:
    return _parse(name, default, str, "a string")


def env_optional_str(name: str) -> str | None:
    value = env_str(name)
    return value or None


def env_bool(name: str, default: bool = False) -> bool:
    def parse(raw: str) -> bool:
        lowered = raw.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ValueError(raw)

    return _parse(name, default, parse, "one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    value = _parse(name, default, int, "an integer")
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    value = _parse(name, default, float, "a number")
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    def parse(raw: str) -> list[str]:
        return [item.strip() for item in raw.split(",") if item.strip()]

    return _parse(name, list(default or []), parse, "a comma-separated list")


class Rate(NamedTuple):
    """At most ``limit`` per ``seconds``."""

    limit: int
    seconds: int


# The grammar django-ninja reads API_RATE_LIMIT in, so every rate in the settings reads alike.
_RATE = re.compile(r"(\d+)/(\d*)(s|sec|m|min|h|hour|d|day)")
_PERIOD_SECONDS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hour": 3600, "d": 86400, "day": 86400}


def env_rate(name: str, default: str) -> Rate:
    """Parse ``<n>/<period>``: ``10/min``, ``20/15min``, ``1000/d``."""

    def parse(raw: str) -> Rate:
        match = _RATE.fullmatch(raw)
        if match is None:
            raise ValueError(raw)
        rate = Rate(int(match[1]), int(match[2] or 1) * _PERIOD_SECONDS[match[3]])
        if rate.limit < 1 or rate.seconds < 1:
            raise ValueError(raw)
        return rate

    return _parse(name, parse(default), parse, "a rate such as 10/min or 20/15min")
