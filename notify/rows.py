"""The rows one transition reads and writes, as plain SQL portable to PostgreSQL and SQLite.

Compiling an ORM query costs far more CPU than sending it (about 0.4 ms against
0.06 ms here), and the worker and callbacks apply hundreds of transitions per
second, so the statements of that hot path are written out once. They take only
values as parameters; column names come from this module, never from input.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any, NamedTuple

from django.db import DEFAULT_DB_ALIAS, connection, connections, models, transaction
from django.db.backends.utils import CursorWrapper

from notify.rules.machine import ClaimSnapshot, EventSnapshot
from notify.rules.vocabulary import Channel, ClaimState
from plumbing.clock import parse_database_time
from policies.cache import policy_version
from policies.models import PolicyVersion
from policies.rendering import Audience


class Loaded(NamedTuple):
    """An event as one transition attempt sees it."""

    event: EventSnapshot
    version: int
    lease_token: int
    policy: PolicyVersion
    claims: Mapping[Channel, ClaimSnapshot]


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
_STEP_READ = f"""
SELECT {{now}}, {_EVENT_COLUMNS}, e.wake_at, v.ciphertext, e.id, c.provider_ref, e.locale, e.time_zone,
       e.step_failures{{snapshot_version}}
FROM {{source}} e LEFT JOIN notify_claim c ON c.event_id = e.id LEFT JOIN notify_vaultentry v ON v.event_id = e.id
{{where}}
"""


def _cursor() -> CursorWrapper:
    """A cursor for this module's statements.

    On PostgreSQL each statement is prepared on its connection the first time it runs, and
    later runs send only the values. These few statements run hundreds of times a second,
    and PostgreSQL parsing and planning one again each time (as it must for Django's cursors,
    which write the values into the statement's text) was about 40 % of its CPU for a
    creation's INSERT: 0.43-0.60 ms against 0.27-0.33 ms prepared, the client's 0.19-0.23 ms
    against 0.14-0.16 ms. The cursor is Django's own otherwise (its connection checks, its
    error translation, its query log): only the cursor underneath differs
    (``config.database.base.DatabaseWrapper.prepared_cursor``).
    """
    database = connections[DEFAULT_DB_ALIAS]  # one look-up through the thread's connections
    # Only the project's PostgreSQL backend prepares (config.database, named by ENGINE and
    # not imported here: config imports notify).
    prepared = getattr(database, "prepared_cursor", None)
    cursor: CursorWrapper = prepared() if prepared is not None else database.cursor()
    return cursor


def _aware(value: datetime | None) -> datetime | None:
    # SQLite hands back the naive UTC the ORM stored; PostgreSQL hands back aware values.
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _param(value: object) -> Any:
    if isinstance(value, datetime):
        return connection.ops.adapt_datetimefield_value(value)
    return value


def load(event_id: str) -> Loaded:
    with _cursor() as cursor:
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
    sql = _STEP_READ.format(
        now=database_time(None)[0], source="notify_event", where="WHERE e.id = %s", snapshot_version=""
    )
    with _cursor() as cursor:
        cursor.execute(sql, [event_id])
        return _step_read(event_id, cursor.fetchall())


def _step_read(event_id: str, rows: list[tuple[Any, ...]]) -> StepRead:
    loaded = _loaded(event_id, [row[1:13] for row in rows])
    first = rows[0]
    sealed = None if first[14] is None else bytes(first[14])
    refs = {Channel(row[10]): row[16] for row in rows if row[10] is not None and row[16]}
    audience = Audience(locale=str(first[17]), time_zone=str(first[18]))
    return StepRead(
        str(first[15]), loaded, parse_database_time(first[0]), _aware(first[13]), sealed, refs, audience, first[19]
    )


def _loaded(event_id: str, rows: list[tuple[Any, ...]]) -> Loaded:
    if not rows:
        raise LookupError(f"no event {event_id}")
    first = rows[0]
    event = EventSnapshot(
        state=first[0],
        created_at=_aware(first[3]),  # type: ignore[arg-type]
        expires_at=_aware(first[4]),  # type: ignore[arg-type]
        state_entered_at=_aware(first[5]),  # type: ignore[arg-type]
        last_observation_at=_aware(first[6]),
        fallback_available=bool(first[7]),
    )
    claims = {Channel(row[9]): ClaimSnapshot(row[10], _aware(row[11])) for row in rows if row[9] is not None}
    return Loaded(event, first[1], first[2], policy_version(first[8]), claims)


class TransitionRaceError(RuntimeError):
    """Raised when a write lost more races than the table allows: a bug, not contention.

    Here, not in ``notify.transitions`` which raises it: that module is compiled (config.native),
    and mypyc compiles no subclass of a built-in exception.
    """


class ClaimMove(NamedTuple):
    """Move the event's claim on ``channel`` to new values, only from one of ``predecessors``."""

    channel: Channel
    predecessors: list[str]
    fields: Mapping[str, object]


@dataclass(frozen=True)
class Write:
    """Everything one transition attempt writes, conditional on its compare-and-set landing."""

    event_id: str
    version: int
    lease_token: int | None
    event_fields: Mapping[str, object]
    observation: Mapping[str, object] | None = None
    transition: Mapping[str, object] | None = None
    new_claim: Mapping[str, object] | None = None
    claim_move: ClaimMove | None = None


def commit(write: Write) -> bool:
    """Apply ``write`` if the event's version (and lease token, for a holder) is still what was read.

    Returns False, having written nothing, when another writer got there first.
    On PostgreSQL the compare-and-set and every dependent row go in one statement
    (data-modifying CTEs that run only if the UPDATE matched), so a transition is one
    round trip and atomic without an explicit transaction. SQLite runs the same
    steps one by one inside a transaction.

    A write refused by a constraint (a callback's retried report meets the observation's
    unique ``(event, dedup_key)``) raises IntegrityError having written nothing, on both
    databases, whether or not the caller holds a transaction: inside one, the statement
    gets a savepoint, so that the refusal does not abort the caller's work.
    """
    if connection.vendor == "postgresql":
        if not connection.in_atomic_block:
            return _commit_in_one_statement(write)
        with transaction.atomic():
            return _commit_in_one_statement(write)
    with transaction.atomic():
        return _commit_step_by_step(write)


def insert_together(
    parent: models.Model,
    unique: tuple[str, ...],
    dependents: list[models.Model],
    *,
    only_if: tuple[str, list[Any]] | None = None,
) -> bool:
    """INSERT ``parent`` and the rows that hang on it, all or none; False if nothing was written.

    The API creates an event with its claim, vault entry and first transition on every
    request: on PostgreSQL that is one statement (the dependents are inserted only if
    the parent was), with no ORM query to compile and no transaction round trips. A
    parent whose ``unique`` columns are taken (a concurrent twin request) inserts nothing,
    and so does one where the SQL condition ``only_if`` (with its parameters) is false.
    """
    instances = [parent, *dependents]
    rows = [(type(instance)._meta.db_table, _model_row(instance)) for instance in instances]
    (parent_table, parent_row), dependent_rows = rows[0], rows[1:]
    condition, condition_params = only_if or ("", [])
    params = _params(parent_row) + condition_params
    conflict = f"ON CONFLICT ({', '.join(unique)}) DO NOTHING"
    parent_insert = f"{_insert_sql(parent_table, parent_row, where=condition)} {conflict}"
    if connection.vendor != "postgresql":
        with transaction.atomic(), _cursor() as cursor:
            cursor.execute(parent_insert, params)
            if cursor.rowcount != 1:
                return False
            for table, row in dependent_rows:
                cursor.execute(_insert_sql(table, row), _params(row))
        _saved(instances)
        return True
    parts = [f"parent AS ({parent_insert} RETURNING 1)"]
    for number, (table, row) in enumerate(dependent_rows):
        parts.append(f"d{number} AS ({_insert_sql(table, row, source='parent')})")
        params += _params(row)
    with _cursor() as cursor:
        cursor.execute(f"WITH {', '.join(parts)} SELECT count(*) FROM parent", params)
        (inserted,) = cursor.fetchone()
    if inserted == 1:
        _saved(instances)
    return bool(inserted == 1)


def _saved(instances: list[models.Model]) -> None:
    # As the ORM marks what it saved: a later save() of one of them is an UPDATE.
    alias = connection.alias
    for instance in instances:
        instance._state.adding, instance._state.db = False, alias


def _model_row(instance: models.Model) -> dict[str, object]:
    """The column values Django would INSERT for ``instance`` (an unset auto id left to the database)."""
    row = {}
    values = instance.__dict__  # where a model keeps each field's value, under its attname
    for field, kind in _insert_fields(type(instance)):
        value = values[field.attname]
        if value is None and field.primary_key:
            continue
        if value is None or (kind is not None and _as_it_is(value, kind)):
            row[field.column] = value  # a datetime is adapted with every parameter (_params)
        else:
            row[field.column] = field.get_db_prep_save(value, connection)
    return row


# The fields whose get_db_prep_save hands a value of their own kind (and None) back unchanged, but
# for the database's datetime adaptation that _param applies to every parameter anyway. A creation
# writes some forty such values; converting each through its field cost it 0.1-0.3 ms of CPU.
_UNCHANGED: tuple[tuple[type[models.Field], type], ...] = (  # type: ignore[type-arg]
    (models.CharField, str),
    (models.TextField, str),
    (models.BooleanField, bool),
    (models.IntegerField, int),
    (models.DateTimeField, datetime),
)


@cache
def _insert_fields(model: type[models.Model]) -> tuple[tuple[models.Field, type | None], ...]:  # type: ignore[type-arg]
    """Each concrete field of ``model``, with the kind of value it writes as it is (None: convert every value)."""
    return tuple((field, _unchanged_kind(field)) for field in model._meta.concrete_fields)


def _as_it_is(value: object, kind: type) -> bool:
    if type(value) is kind and kind is not datetime:  # the common case, in one comparison
        return True
    if not isinstance(value, kind):
        return False
    if isinstance(value, bool):  # an int, to Python; an integer column's get_prep_value makes it 0 or 1
        return kind is bool
    if isinstance(value, datetime):  # a naive one is made aware (with a warning) by the field
        return value.tzinfo is not None
    return True


def _unchanged_kind(field: models.Field) -> type | None:  # type: ignore[type-arg]
    if isinstance(field, models.ForeignKey):
        return _unchanged_kind(field.target_field)
    return next((kind for field_class, kind in _UNCHANGED if isinstance(field, field_class)), None)


def insert(table: str, row: Mapping[str, object]) -> int:
    """INSERT one row into one of this app's tables and return its id."""
    with _cursor() as cursor:
        cursor.execute(f"{_insert_sql(table, row)} RETURNING id", _params(row))
        (row_id,) = cursor.fetchone()
    return int(row_id)


def _insert_sql(table: str, row: Mapping[str, object], *, source: str = "", link: str = "", where: str = "") -> str:
    """``INSERT`` of one row's values; with ``source`` (a CTE's name) selected ``FROM`` it, so the
    row is inserted only if that CTE returned a row; with ``where``, only if that condition holds;
    ``link`` is an SQL expression for ``observation_id``."""
    columns, values = ", ".join(row), _placeholders(row)
    if link:
        columns, values = f"{columns}, observation_id", f"{values}, {link}"
    if source:
        return f"INSERT INTO {table} ({columns}) SELECT {values} FROM {source}"
    if where:
        return f"INSERT INTO {table} ({columns}) SELECT {values} WHERE {where}"
    return f"INSERT INTO {table} ({columns}) VALUES ({values})"


# A None is written into the statement as NULL, not passed as a parameter: psycopg caches its
# parse of a statement (where the placeholders are) only up to 50 parameters. A creation's one
# statement had 51, so every creation parsed its 1,200 characters again (0.1-0.2 ms of CPU); its
# NULLs bring it under. Each pattern of NULLs is a statement of its own, prepared once.


def _placeholder(value: object) -> str:
    return "NULL" if value is None else "%s"


def _placeholders(row: Mapping[str, object]) -> str:
    return ", ".join([_placeholder(value) for value in row.values()])


def _params(row: Mapping[str, object]) -> list[Any]:
    # The thread's connection looked up once, not once per datetime (each look-up goes through
    # Django's connection proxy and asgiref's thread-local: a creation wrote a dozen).
    adapt = connection.ops.adapt_datetimefield_value
    return [adapt(value) if isinstance(value, datetime) else value for value in row.values() if value is not None]


def _assignments(fields: Mapping[str, object]) -> str:
    return ", ".join(f"{column} = {_placeholder(value)}" for column, value in fields.items())


def _event_update(write: Write) -> tuple[str, list[Any]]:
    sql = f"UPDATE notify_event SET {_assignments(write.event_fields)} WHERE id = %s AND version = %s"
    params = [*_params(write.event_fields), write.event_id, write.version]
    if write.lease_token is not None:
        # Fencing: a holder whose lease was taken over (token bumped) must not write.
        sql += " AND lease_token = %s"
        params.append(write.lease_token)
    return sql, params


def _claim_update(write: Write, move: ClaimMove) -> tuple[str, list[Any]]:
    states = ", ".join(["%s"] * len(move.predecessors))
    sql = (
        f"UPDATE notify_claim SET {_assignments(move.fields)} "
        f"WHERE event_id = %s AND channel = %s AND state IN ({states})"
    )
    return sql, [*_params(move.fields), write.event_id, move.channel.value, *move.predecessors]


def _commit_in_one_statement(write: Write) -> bool:
    update, params = _event_update(write)
    parts = [f"moved AS ({update} RETURNING id)"]

    def insert_if_moved(
        name: str, table: str, row: Mapping[str, object], *, link: str = "", returning: bool = False
    ) -> None:
        # Selecting the values FROM moved inserts the row only if the compare-and-set matched.
        # The observation's id exists only inside this statement: ``link`` ties the transition to it.
        tail = " RETURNING id" if returning else ""
        parts.append(f"{name} AS ({_insert_sql(table, row, source='moved', link=link)}{tail})")
        params.extend(_params(row))

    if write.observation is not None:
        insert_if_moved("evidence", "notify_observation", write.observation, returning=True)
    if write.transition is not None:
        link = "(SELECT id FROM evidence)" if write.observation is not None else ""
        insert_if_moved("history", "notify_transition", write.transition, link=link)
    if write.new_claim is not None:
        insert_if_moved("new_claim", "notify_claim", write.new_claim)
    if write.claim_move is not None:
        claim_sql, claim_params = _claim_update(write, write.claim_move)
        parts.append(f"claim_moved AS ({claim_sql} AND EXISTS (SELECT 1 FROM moved))")
        params += claim_params
    with _cursor() as cursor:
        cursor.execute(f"WITH {', '.join(parts)} SELECT count(*) FROM moved", params)
        (landed,) = cursor.fetchone()
    return bool(landed == 1)


def _commit_step_by_step(write: Write) -> bool:
    update, params = _event_update(write)
    with _cursor() as cursor:
        cursor.execute(update, params)
        if cursor.rowcount != 1:
            return False
    observation_id = insert("notify_observation", write.observation) if write.observation is not None else None
    if write.transition is not None:
        insert("notify_transition", {**write.transition, "observation_id": observation_id})
    if write.new_claim is not None:
        insert("notify_claim", write.new_claim)
    if write.claim_move is not None:
        claim_sql, claim_params = _claim_update(write, write.claim_move)
        with _cursor() as cursor:
            cursor.execute(claim_sql, claim_params)
    return True


# Leases and the intent to call a provider: every worker step takes, uses and gives back
# one lease, so each is a single statement here (the ORM's compile and an explicit
# transaction's round trips cost more than the statement itself).
#
# Lease times are the database's, computed inside the statements: hosts' clocks disagree,
# and a worker whose clock ran ahead would otherwise take over a lease still held, or one
# running behind keep writing under a lease already expired. ``at`` pins the time instead
# (a test's fake clock, which stands for the database's); None, in production, means the
# database's own clock.

_DATABASE_NOW = {
    "postgresql": "statement_timestamp()",
    # SQLite keeps datetimes as ISO text; its clock is the host's (it is embedded).
    "sqlite": "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now')",
}
_DATABASE_LATER = {
    "postgresql": "(statement_timestamp() + %s)",
    "sqlite": "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', %s)",
}


def database_time(at: datetime | None, plus: timedelta | None = None) -> tuple[str, list[Any]]:
    """Return the SQL (and its parameters) for the database's time now, or ``plus`` from now."""
    if at is not None:
        return "%s", [_param(at + (plus or timedelta(0)))]
    if plus is None:
        return _DATABASE_NOW[connection.vendor], []
    if connection.vendor == "postgresql":
        return _DATABASE_LATER["postgresql"], [plus]
    return _DATABASE_LATER["sqlite"], [f"{plus.total_seconds():+.6f} seconds"]


def take_lease(event_id: str, owner: str, *, ttl: timedelta, at: datetime | None) -> int | None:
    """Take the event's lease if it is free or expired; return the new fencing token, or None."""
    # The condition, the token bump and the read of the new token are one statement: two
    # takers cannot both see the lease free, and the bump fences out whoever held it before.
    taken = _lease_update(
        "lease_owner = %s, lease_expires_at = {later}, lease_token = lease_token + 1",
        "(lease_expires_at IS NULL OR lease_expires_at <= {now}) RETURNING lease_token",
        event_id, at=at, ttl=ttl, before=[owner],
    )  # fmt: skip
    return None if taken is None else int(taken[0])


# The most urgent due event whose lease is free: the one whose ``act_by`` (the last moment its
# next step can start and still finish before expiry) comes first. Rows another worker is
# taking this instant are skipped, not waited for (PostgreSQL's SKIP LOCKED; SQLite has one
# writer at a time): two workers take the two most urgent instead of queueing on one.
_MOST_URGENT = {
    "postgresql": "SELECT id FROM notify_event WHERE act_by IS NOT NULL AND next_action_at <= {now} AND {free} "
    "ORDER BY act_by LIMIT 1 FOR UPDATE SKIP LOCKED",
    "sqlite": "SELECT id FROM notify_event WHERE act_by IS NOT NULL AND next_action_at <= {now} AND {free} "
    "ORDER BY act_by LIMIT 1",
}
_LEASE_FREE = "(lease_expires_at IS NULL OR lease_expires_at <= {now})"
# The lease runs for the event's own policy's ``lease_ttl``, added to the database's time.
_POLICY_LEASE_TTL = "(SELECT p.lease_ttl FROM policies_policyversion p WHERE p.id = notify_event.policy_id)"
_LATER_BY_POLICY = {
    "postgresql": "({now} + " + _POLICY_LEASE_TTL + ")",
    "sqlite": "strftime('%%Y-%%m-%%d %%H:%%M:%%f', {now}, (" + _POLICY_LEASE_TTL + " / 1000000.0) || ' seconds')",
}


# The taken event's version as the statement's snapshot has it (its other reads see that snapshot too).
_SNAPSHOT_VERSION = ", (SELECT s.version FROM notify_event s WHERE s.id = e.id)"


def take_most_urgent(owner: str, *, at: datetime | None) -> StepRead | None:
    """Take the lease of the most urgent due event and read it for the step; None if none is due.

    Wake-ups are served in order of urgency, not of arrival: whichever wake-up a worker
    runs, it steps the due event closest to its ``act_by``. Choosing, taking and bumping
    the fencing token are one statement, so two workers never take the same event; the
    lease condition is repeated outside the choice because a row chosen by a concurrent
    statement's snapshot is re-checked there once it is locked. On PostgreSQL the step's
    read is the same statement (the taken row, joined); SQLite reads it after.
    """
    vendor = connection.vendor
    now, now_params = database_time(at)
    free = _LEASE_FREE.format(now=now)
    later = _LATER_BY_POLICY[vendor].format(now=now)
    choice = _MOST_URGENT[vendor].format(now=now, free=free)
    take = (
        f"UPDATE notify_event SET lease_owner = %s, lease_expires_at = {later}, lease_token = lease_token + 1 "
        f"WHERE id = ({choice}) AND {free} RETURNING "
    )
    params = [owner, *now_params, *now_params, *now_params, *now_params]
    with _cursor() as cursor:
        if vendor == "postgresql":
            read = _STEP_READ.format(
                now=database_time(None)[0], source="taken", where="", snapshot_version=_SNAPSHOT_VERSION
            )
            cursor.execute(f"WITH taken AS ({take} *) {read}", params)
            rows = cursor.fetchall()
        else:
            cursor.execute(f"{take} id", params)
            taken = cursor.fetchone()
            return None if taken is None else read_for_step(str(taken[0]))
    if not rows:
        return None
    if rows[0][2] != rows[0][20]:
        # The event changed after this statement's snapshot was taken: the lock re-checked the
        # newest row, but the claims and vault joined to it were read in the snapshot (a fallback
        # an operator committed meanwhile would read as email_claimed without its claim). Read
        # it afresh, under the lease now held; anything later is caught by the version guard.
        return read_for_step(str(rows[0][15]))
    return _step_read("", rows)


def renew_lease(event_id: str, token: int, *, ttl: timedelta, at: datetime | None) -> bool:
    """Extend a lease still held (not expired, not taken over) to ``ttl`` from now."""
    condition = "lease_token = %s AND lease_expires_at > {now} RETURNING id"
    return _lease_update("lease_expires_at = {later}", condition, event_id, at=at, ttl=ttl, after=[token]) is not None


def release_expired_lease(event_id: str, token: int, *, at: datetime | None) -> bool:
    """Free a lease that expired under fencing ``token`` and bump the token; False if it still holds."""
    assignments = "lease_owner = '', lease_expires_at = NULL, lease_token = lease_token + 1"
    condition = "lease_token = %s AND lease_expires_at <= {now} RETURNING id"
    return _lease_update(assignments, condition, event_id, at=at, after=[token]) is not None


def _lease_update(
    assignments: str,
    condition: str,
    event_id: str,
    *,
    at: datetime | None,
    ttl: timedelta | None = None,
    before: list[Any] | None = None,
    after: list[Any] | None = None,
) -> tuple[Any, ...] | None:
    """Run ``UPDATE notify_event SET assignments WHERE id = %s AND condition`` with ``{now}`` and
    ``{later}`` (now + ``ttl``) as the database's time; ``before`` and ``after`` are the other
    parameters either side of the id. Return the row it returned, if any."""
    now, now_params = database_time(at)
    later, later_params = database_time(at, ttl) if ttl is not None else ("", [])
    sql = f"UPDATE notify_event SET {assignments} WHERE id = %s AND {condition}".format(now=now, later=later)
    params = [*(before or []), *later_params, event_id, *(after or []), *now_params]
    with _cursor() as cursor:
        cursor.execute(sql, params)
        row: tuple[Any, ...] | None = cursor.fetchone()
    return row


# At most one wake-up per event is pending: a new one is sent only if none is, or the pending
# one is due later than the new one (a duplicate would start a second chain of wake-ups
# that lives as long as the event). One due by now counts as spent.
_WAKE_UP_NEEDED = "(wake_at IS NULL OR wake_at <= %s OR wake_at > %s)"


def wake_up_needed(pending: datetime | None, *, at: datetime, now: datetime) -> bool:
    """``_WAKE_UP_NEEDED`` for a pending wake-up the caller read: for a lease holder's own write."""
    return pending is None or pending <= now or pending > at


def record_wake_up(event_id: str, *, at: datetime, now: datetime) -> bool:
    """Record a wake-up due ``at`` unless an earlier one is pending; True if it is to be sent."""
    with _cursor() as cursor:
        cursor.execute(
            f"UPDATE notify_event SET wake_at = %s WHERE id = %s AND {_WAKE_UP_NEEDED}",
            [_param(at), event_id, _param(now), _param(at)],
        )
        return bool(cursor.rowcount == 1)


def forget_wake_ups(event_ids: list[str], *, at: datetime) -> None:
    """Forget the wake-ups recorded as pending at ``at`` that did not go (the broker did not take them).

    Only where the record is still ``at``: one made since belongs to a hint that went.
    """
    marks = ", ".join(["%s"] * len(event_ids))
    with _cursor() as cursor:
        cursor.execute(
            f"UPDATE notify_event SET wake_at = NULL WHERE id IN ({marks}) AND wake_at = %s", [*event_ids, _param(at)]
        )


def release_lease(event_id: str, token: int, *, wake_up: tuple[datetime, datetime] | None = None) -> bool:
    """Give the event back, unless the lease was taken over (its token bumped) meanwhile.

    ``wake_up`` (at, now): record the holder's wake-up for the event in the same statement,
    as ``record_wake_up`` would. Returns whether that wake-up is to be sent (without one:
    whether the lease was given back).
    """
    if wake_up is None:
        with _cursor() as cursor:
            cursor.execute(
                "UPDATE notify_event SET lease_owner = '', lease_expires_at = NULL WHERE id = %s AND lease_token = %s",
                [event_id, token],
            )
            return bool(cursor.rowcount == 1)
    at, now = wake_up
    sql = (
        "UPDATE notify_event SET lease_owner = '', lease_expires_at = NULL, "
        f"wake_at = CASE WHEN {_WAKE_UP_NEEDED} THEN %s ELSE wake_at END "
        "WHERE id = %s AND lease_token = %s RETURNING wake_at"
    )
    with _cursor() as cursor:
        cursor.execute(sql, [_param(now), _param(at), _param(at), event_id, token])
        row = cursor.fetchone()
    # A pending wake-up due exactly then reads as new: one spare wake-up, which finds nothing due.
    return row is not None and _aware(row[0]) == at


def record_step_failure(event_id: str, token: int, *, error: str, retry_at: datetime, now: datetime) -> datetime | None:
    """Count a step that raised on its event, hold its next action back to ``retry_at``, give the lease back.

    The schedule is pushed back, not left due: a due event with a free lease is the most urgent
    at every turn (``take_most_urgent``), so a step that raises at once would take every turn,
    whichever event the turn was for. A later schedule ``decide`` stored stays; an event with
    none (terminal) keeps none. Fenced by the lease's ``token``: a holder taken over writes
    nothing. Returns the wake-up recorded for ``retry_at``, as ``release_lease`` does (None:
    none to send).
    """
    sql = (
        "UPDATE notify_event SET step_failures = step_failures + 1, step_error = %s,"
        " next_action_at = CASE WHEN next_action_at IS NULL OR next_action_at > %s THEN next_action_at ELSE %s END,"
        " lease_owner = '', lease_expires_at = NULL,"
        f" wake_at = CASE WHEN next_action_at IS NOT NULL AND {_WAKE_UP_NEEDED} THEN %s ELSE wake_at END"
        " WHERE id = %s AND lease_token = %s RETURNING wake_at"
    )
    retry = _param(retry_at)
    with _cursor() as cursor:
        cursor.execute(sql, [error[:200], retry, retry, _param(now), retry, retry, event_id, token])
        row = cursor.fetchone()
    return retry_at if row is not None and _aware(row[0]) == retry_at else None


def clear_step_failures(event_id: str, token: int) -> None:
    """Set the event's failures in a row back to none after a step that completed, under its lease ``token``.

    After the lease went back with the step's last write: the token is bumped only by a take-over,
    so a step taken over since (whose count is its own) is left alone.
    """
    with _cursor() as cursor:
        cursor.execute(
            "UPDATE notify_event SET step_failures = 0, step_error = '' WHERE id = %s AND lease_token = %s",
            [event_id, token],
        )


@dataclass(frozen=True)
class Intent:
    """Move the claim on ``channel`` from claimed to submitting, and the event's schedule with it,
    only while the lease (``token``, unexpired) and the event's ``version`` still hold.

    The lease is extended by ``hold`` and the claim becomes due for settling ``settle_after``
    from now, both on the database's clock (or ``at``, a test's pinned time).
    """

    event_id: str
    channel: Channel
    token: int
    version: int
    at: datetime | None
    hold: timedelta
    settle_after: timedelta
    schedule: Mapping[str, object]
    segments: int | None = None  # an SMS's segment count, recorded on its claim


def record_intent(intent: Intent) -> tuple[bool, bool]:
    """Commit ``intent``; return (the lease and version held, the claim moved).

    On PostgreSQL one statement: the event row is locked while the lease is checked (a
    take-over waits until the intent is committed, and then finds the claim submitting),
    the claim moves only from claimed, and the schedule only if the claim moved.
    """
    now, now_params = database_time(intent.at)
    settle, settle_params = database_time(intent.at, intent.settle_after)
    expiry, expiry_params = database_time(intent.at, intent.hold)
    held_sql = (
        f"SELECT id FROM notify_event WHERE id = %s AND lease_token = %s AND lease_expires_at > {now} AND version = %s"
    )
    held = [intent.event_id, intent.token, *now_params, intent.version]
    claim_sql = (
        f"UPDATE notify_claim SET state = %s, attempts = attempts + 1, submitted_at = COALESCE(submitted_at, {now}),"
        f" attempt_started_at = {now}, next_attempt_at = {settle}, updated_at = {now},"
        " segments = COALESCE(%s, segments) WHERE channel = %s AND state = %s AND event_id"
    )
    claim = [
        ClaimState.SUBMITTING.value, *now_params, *now_params, *settle_params, *now_params, intent.segments,
        str(intent.channel), ClaimState.CLAIMED.value,
    ]  # fmt: skip
    schedule_sql = f"UPDATE notify_event SET {_assignments(intent.schedule)}, lease_expires_at = {expiry} WHERE id"
    schedule = [*_params(intent.schedule), *expiry_params]
    if connection.vendor != "postgresql":
        with transaction.atomic(), _cursor() as cursor:
            cursor.execute(held_sql, held)
            if cursor.fetchone() is None:
                return False, False
            cursor.execute(f"{claim_sql} = %s", [*claim, intent.event_id])
            if cursor.rowcount != 1:
                return True, False
            cursor.execute(f"{schedule_sql} = %s", [*schedule, intent.event_id])
            return True, True
    sql = (
        f"WITH held AS ({held_sql} FOR UPDATE),"
        f" claimed AS ({claim_sql} IN (SELECT id FROM held) RETURNING event_id),"
        f" scheduled AS ({schedule_sql} IN (SELECT event_id FROM claimed) RETURNING id)"
        " SELECT (SELECT count(*) FROM held), (SELECT count(*) FROM scheduled)"
    )
    with _cursor() as cursor:
        cursor.execute(sql, [*held, *claim, *schedule])
        locked, moved = cursor.fetchone()
    return bool(locked), bool(moved)
