"""How the write path reads an event: as one transition attempt sees it, and as a worker step starts from it."""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from notify.rules.machine import ClaimSnapshot, EventSnapshot
from notify.rules.plan import Loaded
from notify.rules.vocabulary import Channel
from notify.writes.sql import aware, database_time, statement_cursor
from plumbing.clock import parse_database_time
from policies.cache import policy_version
from policies.rendering import Audience

_EVENT_COLUMNS = """e.state, e.version, e.lease_token, e.created_at, e.expires_at, e.state_entered_at,
       e.last_observation_at, e.fallback_available, e.policy_id, c.channel, c.state, c.next_attempt_at"""
_LOAD = f"""
SELECT {_EVENT_COLUMNS}
FROM notify_event e LEFT JOIN notify_claim c ON c.event_id = e.id
WHERE e.id = %s
"""
# What a worker step reads, in one round trip: the database's time first (the step measures
# its clock by it), the event as ``_LOAD`` has it, and what only the step needs: the time of
# its pending wake-up, the sealed destinations, the claims' provider references and whom the
# messages are worded for.
# ``{source}``: the table, or the event a statement has just taken.
STEP_READ = f"""
SELECT {{now}}, {_EVENT_COLUMNS}, e.wake_at, v.ciphertext, e.id, c.provider_ref, e.locale, e.time_zone,
       e.step_failures{{snapshot_version}}
FROM {{source}} e LEFT JOIN notify_claim c ON c.event_id = e.id LEFT JOIN notify_vaultentry v ON v.event_id = e.id
{{where}}
"""


def load(event_id: str) -> Loaded:
    with statement_cursor() as cursor:
        cursor.execute(_LOAD, [event_id])
        rows = cursor.fetchall()
    return _loaded(event_id, rows)


@dataclass(frozen=True)
class StepRead:
    """An event as a worker step starts from."""

    event_id: str
    loaded: Loaded
    database_time: datetime
    wake_at: datetime | None  # when its pending wake-up is due, if one was sent
    sealed: bytes | None  # the vault's ciphertext (None once retention purged it)
    provider_refs: Mapping[Channel, str]  # the provider's id of each claim's message, once known
    audience: Audience  # the locale and time zone the messages are worded for
    step_failures: int  # steps that raised in a row (``record_step_failure``)


def read_for_step(event_id: str) -> StepRead:
    """Return the event as a step starts from it; LookupError if there is none."""
    sql = STEP_READ.format(
        now=database_time(None)[0], source="notify_event", where="WHERE e.id = %s", snapshot_version=""
    )
    with statement_cursor() as cursor:
        cursor.execute(sql, [event_id])
        return step_read(event_id, cursor.fetchall())


def step_read(event_id: str, rows: list[tuple[Any, ...]]) -> StepRead:
    loaded = _loaded(event_id, [row[1:13] for row in rows])
    first = rows[0]
    sealed = None if first[14] is None else bytes(first[14])
    refs = {Channel(row[10]): row[16] for row in rows if row[10] is not None and row[16]}
    audience = Audience(locale=str(first[17]), time_zone=str(first[18]))
    return StepRead(
        str(first[15]), loaded, parse_database_time(first[0]), aware(first[13]), sealed, refs, audience, first[19]
    )


def _loaded(event_id: str, rows: list[tuple[Any, ...]]) -> Loaded:
    if not rows:
        raise LookupError(f"no event {event_id}")
    first = rows[0]
    event = EventSnapshot(
        state=first[0],
        created_at=aware(first[3]),  # type: ignore[arg-type]
        expires_at=aware(first[4]),  # type: ignore[arg-type]
        state_entered_at=aware(first[5]),  # type: ignore[arg-type]
        last_observation_at=aware(first[6]),
        fallback_available=bool(first[7]),
    )
    claims = {Channel(row[9]): ClaimSnapshot(row[10], aware(row[11])) for row in rows if row[9] is not None}
    return Loaded(event, first[1], first[2], policy_version(first[8]), claims)
