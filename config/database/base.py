"""PostgreSQL as Django has it, but for how a kept connection is checked before use.

Django checks a kept connection with ``SELECT 1`` before the first query of every request
and every task (CONN_HEALTH_CHECKS): for a worker, one more round trip in every step. A
server that ends a session (a restart, ``pg_terminate_backend``, an idle timeout) sends
its reason and closes the socket, so the check here asks the socket instead: an idle
connection of ours has nothing to read, and anything waiting there is that goodbye. A
network that drops silently is found by neither check before the query's own timeout.
"""

import select

from django.db.backends.postgresql import base


class DatabaseWrapper(base.DatabaseWrapper):
    def is_usable(self) -> bool:
        connection = self.connection
        if connection is None or connection.closed or connection.broken:
            return False
        try:
            readable, _, _ = select.select([connection.fileno()], [], [], 0)
        except (OSError, ValueError):  # the socket is gone already
            return False
        return not readable
