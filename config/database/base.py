"""PostgreSQL as Django has it, but for how a kept connection is checked before use.

Django checks a kept connection with ``SELECT 1`` before the first query of every request
and every task (CONN_HEALTH_CHECKS): for a worker, one more round trip in every step. A
server that ends a session (a restart, ``pg_terminate_backend``, an idle timeout) sends
its reason and closes the socket, so the check here asks the socket instead: an idle
connection of ours has nothing to read, and anything waiting there is that goodbye. A
network that drops silently is found by neither check before the query's own timeout.

And for how a statement on a server-binding cursor is logged: ``notify.writes`` runs its hot
statements on such cursors (prepared, values sent apart) on connections whose other cursors
bind client side. Django reads a client-binding cursor's statement back from the cursor,
which a prepared one does not keep, so the query log (DEBUG, the tests' captured queries)
would show no SQL; it gets the statement with its values written in, as Django logs every
statement where all cursors bind server side.
"""

import select
from typing import Any

import psycopg
from django.db.backends.postgresql import base, operations
from django.db.backends.utils import CursorWrapper


class DatabaseOperations(operations.DatabaseOperations):
    def last_executed_query(self, cursor: Any, sql: str, params: Any) -> str:
        if isinstance(cursor, psycopg.ClientCursor):
            return super().last_executed_query(cursor, sql, params)
        try:
            return self.compose_sql(sql, params)  # type: ignore[no-any-return]
        except psycopg.DataError:  # a value it cannot write as SQL: the statement without values
            return sql


class PreparingCursor(psycopg.Cursor):
    """Sends the parameters apart from the statement and has PostgreSQL prepare it."""

    def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None, **options: Any) -> Any:
        return super().execute(query, params, prepare=True, **options)


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations

    # Set only inside ``prepared_cursor``: a wrapper is its own thread's (Django keeps one per
    # thread), so no other thread's cursor can be made while it is.
    _preparing = False

    def prepared_cursor(self) -> CursorWrapper:
        """Django's ``cursor()`` (its health check, connection, error translation and query log),
        made over a ``PreparingCursor`` (``notify.writes``' statements).

        Through ``create_cursor``, the backend's hook for the cursor underneath: making Django's
        own and swapping it out after would cost every statement a cursor made for nothing.
        """
        # Connected first, so no cursor that connecting makes (Django's version check) is a preparing one.
        self.close_if_health_check_failed()
        self.ensure_connection()
        self._preparing = True
        try:
            return self.cursor()
        finally:
            self._preparing = False

    def create_cursor(self, name: str | None = None) -> Any:
        if self._preparing:
            # Django's own adds, to an unnamed cursor, only its time zone's loader where the
            # connection's differs: the connection is made with it (get_connection_params), and
            # it changes only with USE_TZ or the database's TIME_ZONE, which the project never does.
            return PreparingCursor(self.connection)
        return super().create_cursor(name)

    def is_usable(self) -> bool:
        connection = self.connection
        if connection is None or connection.closed or connection.broken:
            return False
        try:
            readable, _, _ = select.select([connection.fileno()], [], [], 0)
        except (OSError, ValueError):  # the socket is gone already
            return False
        return not readable
