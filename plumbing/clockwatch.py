"""Each host's clock offset from the database's, kept where ``/metrics`` can read it.

Every reading of the database's time (``plumbing.clock``) reports the host's offset here.
The largest offset of the current window is written for this host at most every
``FLUSH_EVERY`` seconds: one small upsert, off the path of any transition.
"""

import socket
import threading
import time

from django.conf import settings
from django.db import connection

FLUSH_EVERY = 15.0

_UPSERT = {
    "postgresql": """
        INSERT INTO notify_hostclock (host, offset_seconds, measured_at) VALUES (%s, %s, statement_timestamp())
        ON CONFLICT (host) DO UPDATE SET offset_seconds = excluded.offset_seconds, measured_at = excluded.measured_at
    """,
    "sqlite": """
        INSERT INTO notify_hostclock (host, offset_seconds, measured_at)
        VALUES (%s, %s, strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now'))
        ON CONFLICT (host) DO UPDATE SET offset_seconds = excluded.offset_seconds, measured_at = excluded.measured_at
    """,
}


def host_name() -> str:
    """The name this host's offset is reported under (``NOTIFY_HOST_NAME``, else the host name)."""
    return str(settings.NOTIFY_HOST_NAME or socket.gethostname())


class _Window:
    """The largest offset (by size, sign kept) seen since the last write.

    Threads of one process share it (a gthread web worker, a threads-pool worker): the
    window is read and emptied under a lock, and written outside it, so that no thread
    writes a window another has just emptied (NULL) and a slow write blocks no reader.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.largest: float | None = None
        # Monotonic time of the last write; the first report writes at once.
        self.written_at = float("-inf")

    def report(self, offset: float) -> None:
        with self._lock:
            self._keep(offset)
            due = time.monotonic() - self.written_at >= FLUSH_EVERY
        if due:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            largest, self.largest = self.largest, None
            if largest is None:
                return
            self.written_at = time.monotonic()
        try:
            with connection.cursor() as cursor:
                cursor.execute(_UPSERT[connection.vendor], [host_name(), largest])
        except BaseException:
            # Not written: the offset goes back into the window and the next report tries again.
            with self._lock:
                self._keep(largest)
                self.written_at = float("-inf")
            raise

    def _keep(self, offset: float) -> None:
        if self.largest is None or abs(offset) > abs(self.largest):
            self.largest = offset


_window = _Window()


def report(offset_seconds: float) -> None:
    """Count one measurement of this host's offset (its clock minus the database's, in seconds)."""
    _window.report(offset_seconds)


def flush() -> None:
    """Write this host's largest offset since the last write now (a process about to stop, a test)."""
    _window.flush()
