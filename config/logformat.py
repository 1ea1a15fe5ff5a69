"""Log formats: one JSON object per line in production, ``key=value`` lines in the demo.

Every domain log line is a short event name (``step``, ``transition``, ``callback``)
with its facts passed as ``extra``; no format puts a destination, link or provider
payload in them, because no caller passes one.
"""

import logging

from pythonjsonlogger.core import RESERVED_ATTRS

_STANDARD = frozenset(RESERVED_ATTRS) | {"message", "asctime", "taskName"}


class ReadableFormatter(logging.Formatter):
    """``time level logger event key=value ...``: the JSON fields, for a human in a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        facts = " ".join(f"{key}={value}" for key, value in record.__dict__.items() if key not in _STANDARD)
        return f"{line} {facts}" if facts else line
