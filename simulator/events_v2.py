"""Validate one PagerDuty Events v2 message (``POST /v2/enqueue``) as PagerDuty does, listing every problem.

The routing key's length is not checked (PagerDuty's are 32 characters; the tests' and the
chaos run's are whatever they configure).
"""

from dataclasses import dataclass
from typing import Any

ACTIONS = ("trigger", "acknowledge", "resolve")
SEVERITIES = ("critical", "error", "warning", "info")
DEDUP_KEY_LIMIT = 255
SUMMARY_LIMIT = 1024


class InvalidEvent(ValueError):
    """A message PagerDuty answers with 400; ``errors`` say why, one line each."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class PagerEvent:
    """A valid message: whose integration, what it does, and to which alert (None: a trigger PagerDuty keys)."""

    routing_key: str
    action: str
    dedup_key: str | None


def parse_event(data: object) -> PagerEvent:
    """Return the message ``data`` (decoded JSON) carries, or raise ``InvalidEvent``."""
    if not isinstance(data, dict):
        raise InvalidEvent(["Event object is not a JSON object"])
    errors: list[str] = []
    routing_key = data.get("routing_key")
    if not _text(routing_key):
        errors.append("'routing_key' is missing or blank")
    action = data.get("event_action")
    if action not in ACTIONS:
        errors.append(f"'event_action' is invalid (must be one of {', '.join(ACTIONS)})")
    dedup_key = data.get("dedup_key")
    if dedup_key is not None and not isinstance(dedup_key, str):
        errors.append("'dedup_key' must be a string")
    elif isinstance(dedup_key, str) and len(dedup_key) > DEDUP_KEY_LIMIT:
        errors.append(f"'dedup_key' is longer than {DEDUP_KEY_LIMIT} characters")
    elif action in ("acknowledge", "resolve") and not _text(dedup_key):
        errors.append(f"'dedup_key' is required to {action}")
    if action == "trigger":
        errors += _payload_errors(data.get("payload"))
    if errors:
        raise InvalidEvent(errors)
    assert isinstance(routing_key, str)
    assert isinstance(action, str)
    return PagerEvent(routing_key, action, dedup_key or None)


def _payload_errors(payload: object) -> list[str]:
    if not isinstance(payload, dict):
        return ["'payload' is missing or not an object"]
    errors = [f"'payload.{name}' is missing or blank" for name in ("summary", "source") if not _text(payload.get(name))]
    summary = payload.get("summary")
    if isinstance(summary, str) and len(summary) > SUMMARY_LIMIT:
        errors.append(f"'payload.summary' is longer than {SUMMARY_LIMIT} characters")
    if payload.get("severity") not in SEVERITIES:
        errors.append(f"'payload.severity' is invalid (must be one of {', '.join(SEVERITIES)})")
    return errors


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())
