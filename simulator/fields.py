"""Read untrusted nested data (a TOML profile, a JSON script) strictly, naming each bad field."""

import math
from collections.abc import Mapping
from enum import StrEnum
from typing import TypeVar

E = TypeVar("E", bound=StrEnum)


def as_number(value: object, path: str, error: type[ValueError]) -> float:
    """Return ``value`` as a float, or raise ``error`` naming ``path``."""
    # bool is an int in Python but never a number here.
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise error(f"{path}: must be a number, got {value!r}")
    return float(value)


class Fields:
    """Read one table field by field; whatever is left unread at :meth:`finish` is an unknown key."""

    def __init__(self, data: object, path: str, error: type[ValueError]) -> None:
        if not isinstance(data, Mapping):
            raise error(f"{path or 'document'}: must be a table")
        self._data = dict(data)
        self._error = error
        self.path = path

    def field(self, key: str) -> str:
        """Return the dotted path of ``key``, for error messages."""
        return f"{self.path}.{key}" if self.path else key

    def fail(self, key: str, problem: str) -> ValueError:
        """Return the error to raise about ``key``."""
        return self._error(f"{self.field(key)}: {problem}")

    def names(self) -> list[str]:
        return list(self._data)

    def has(self, key: str) -> bool:
        return key in self._data

    def pop(self, key: str) -> object:
        if key not in self._data:
            raise self.fail(key, "missing")
        return self._data.pop(key)

    def table(self, key: str) -> "Fields":
        return Fields(self.pop(key), self.field(key), self._error)

    def string(self, key: str) -> str:
        value = self.pop(key)
        if not isinstance(value, str) or not value:
            raise self.fail(key, "must be a non-empty string")
        return value

    def number(self, key: str, default: float | None = None) -> float:
        value = self._data.pop(key, default) if default is not None else self.pop(key)
        return as_number(value, self.field(key), self._error)

    def positive(self, key: str) -> float:
        value = self.number(key)
        if value <= 0:
            raise self.fail(key, f"must be positive, got {value:g}")
        return value

    def non_negative(self, key: str, default: float | None = None) -> float:
        value = self.number(key, default)
        if value < 0:
            raise self.fail(key, f"must not be negative, got {value:g}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self._data.pop(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {value!r}")
        return value

    def choice(self, key: str, options: type[E]) -> E:
        return self._member(self.pop(key), key, options)

    def choices(self, key: str, options: type[E]) -> tuple[E, ...]:
        values = self.pop(key)
        if not isinstance(values, list) or not values:
            raise self.fail(key, "must be a non-empty list")
        return tuple(self._member(value, key, options) for value in values)

    def finish(self) -> None:
        if self._data:
            raise self.fail(next(iter(self._data)), "unknown key")

    def _member(self, value: object, key: str, options: type[E]) -> E:
        if not isinstance(value, str) or value not in options.__members__.values():
            names = ", ".join(option.value for option in options)
            raise self.fail(key, f"{value!r} is not one of {names}")
        return options(value)
