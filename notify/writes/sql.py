"""The SQL every write is made of, portable to PostgreSQL and SQLite.

Compiling an ORM query costs several times the CPU of sending it, and the worker and
callbacks apply hundreds of transitions per second, so the statements of that hot path
are written out once. They take only
values as parameters; column names come from this package, never from input.
"""

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections, models, transaction
from django.db.backends.utils import CursorWrapper


def statement_cursor() -> CursorWrapper:
    """A cursor for the write path's statements.

    On PostgreSQL each statement is prepared on its connection the first time it runs, and
    later runs send only the values: these few statements run hundreds of times a second, and
    parsing and planning each again (as Django's cursors make PostgreSQL do) was a large share
    of the database's CPU. The cursor is Django's own otherwise (its connection checks, its
    error translation, its query log): only the cursor underneath differs
    (``config.database.base.DatabaseWrapper.prepared_cursor``).
    """
    database = connections[DEFAULT_DB_ALIAS]  # one look-up through the thread's connections
    # Only the project's PostgreSQL backend prepares (config.database, named by ENGINE and
    # not imported here: config imports notify).
    prepared = getattr(database, "prepared_cursor", None)
    cursor: CursorWrapper = prepared() if prepared is not None else database.cursor()
    return cursor


def aware(value: datetime | None) -> datetime | None:
    # SQLite hands back the naive UTC the ORM stored; PostgreSQL hands back aware values.
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def adapted(value: object) -> Any:
    if isinstance(value, datetime):
        return connection.ops.adapt_datetimefield_value(value)
    return value


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
    params = values_of(parent_row) + condition_params
    conflict = f"ON CONFLICT ({', '.join(unique)}) DO NOTHING"
    parent_insert = f"{insert_sql(parent_table, parent_row, where=condition)} {conflict}"
    if connection.vendor != "postgresql":
        with transaction.atomic(), statement_cursor() as cursor:
            cursor.execute(parent_insert, params)
            if cursor.rowcount != 1:
                return False
            for table, row in dependent_rows:
                cursor.execute(insert_sql(table, row), values_of(row))
        _saved(instances)
        return True
    parts = [f"parent AS ({parent_insert} RETURNING 1)"]
    for number, (table, row) in enumerate(dependent_rows):
        parts.append(f"d{number} AS ({insert_sql(table, row, source='parent')})")
        params += values_of(row)
    with statement_cursor() as cursor:
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
# for the database's datetime adaptation that ``values_of`` applies to every parameter anyway: a
# creation writes some forty such values, and converting each through its field is its slowest part.
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
    with statement_cursor() as cursor:
        cursor.execute(f"{insert_sql(table, row)} RETURNING id", values_of(row))
        (row_id,) = cursor.fetchone()
    return int(row_id)


def insert_sql(table: str, row: Mapping[str, object], *, source: str = "", link: str = "", where: str = "") -> str:
    """``INSERT`` of one row's values; with ``source`` (a CTE's name) selected ``FROM`` it, so the
    row is inserted only if that CTE returned a row; with ``where``, only if that condition holds;
    ``link`` is an SQL expression for ``observation_id``."""
    columns, values = ", ".join(row), placeholders(row)
    if link:
        columns, values = f"{columns}, observation_id", f"{values}, {link}"
    if source:
        return f"INSERT INTO {table} ({columns}) SELECT {values} FROM {source}"
    if where:
        return f"INSERT INTO {table} ({columns}) SELECT {values} WHERE {where}"
    return f"INSERT INTO {table} ({columns}) VALUES ({values})"


# A None is written into the statement as NULL, not passed as a parameter: psycopg caches its
# parse of a statement (where the placeholders are) only up to 50 parameters, and a creation's
# one statement has more than that with its NULLs. Each pattern of NULLs is a statement of its
# own, prepared once.


def placeholder(value: object) -> str:
    return "NULL" if value is None else "%s"


def placeholders(row: Mapping[str, object]) -> str:
    return ", ".join([placeholder(value) for value in row.values()])


def values_of(row: Mapping[str, object]) -> list[Any]:
    # The thread's connection looked up once, not once per datetime value.
    adapt = connection.ops.adapt_datetimefield_value
    return [adapt(value) if isinstance(value, datetime) else value for value in row.values() if value is not None]


def set_clause(fields: Mapping[str, object]) -> str:
    return ", ".join(f"{column} = {placeholder(value)}" for column, value in fields.items())


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
        return "%s", [adapted(at + (plus or timedelta(0)))]
    if plus is None:
        return _DATABASE_NOW[connection.vendor], []
    if connection.vendor == "postgresql":
        return _DATABASE_LATER["postgresql"], [plus]
    return _DATABASE_LATER["sqlite"], [f"{plus.total_seconds():+.6f} seconds"]
