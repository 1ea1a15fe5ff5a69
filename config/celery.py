"""The Celery application: the broker carries wake-up hints, the database holds the truth."""

import os
from typing import Any

from celery import Celery, Task
from celery.signals import task_postrun, task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("reset_delivery")
# A plain mapping of the CELERY_* settings, not Django's settings object itself: Celery reads
# its configuration on every publish (routes, serializer, retry policy), and reading it through
# Django's lazy settings wrapper cost each wake-up publish about a sixth of its CPU
# (docs/benchmarks.md, "Measured choices"). The settings are fixed once the process starts, so a
# copy loses nothing.
app.config_from_object("config.celery_settings:CELERY", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def _database_hygiene(sender: "Task[Any, Any] | None" = None, **kwargs: Any) -> None:
    """Treat each task as Django treats a request: drop a connection that is broken or past
    CONN_MAX_AGE, and health-check a kept one before its next use.

    Celery's fixup no longer closes connections per task (CELERY_DB_REUSE_MAX), so without
    this a connection PostgreSQL dropped would fail the next task's first statement.
    Eager runs (tests, the embedded demo) share the caller's connection and transaction: left alone.
    """
    if sender is not None and getattr(sender.request, "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()
