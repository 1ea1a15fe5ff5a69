"""``/healthz`` and ``/readyz``: what a load balancer or Kubernetes asks a web process.

``/healthz`` (liveness) says the process answers: it touches nothing else, so a database or
broker outage never gets a healthy process restarted. ``/readyz`` (readiness) says this process
can do its work now: the database answers with every migration applied, and the broker takes a
connection. While either is not so, it answers 503 with a small JSON body naming what is
failing (never an error message, a URL or an HTML page), and the load balancer sends its
traffic elsewhere.

Both are answered by the first middleware, before anything else looks at the request. A probe
comes over plain HTTP to the pod's or the host's own address: Django's host check would refuse
that address (it is in no ``ALLOWED_HOSTS``, nor should it be), the HTTPS redirect would answer
301, and the console's session, login and CSRF have nothing to say to it. Nor is a probe counted
in the request metrics, which it would otherwise dominate on a quiet host.
"""

import copy
import logging
import math
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.executor import MigrationExecutor
from django.db.utils import load_backend
from django.http import HttpRequest, HttpResponseBase, HttpResponseNotAllowed, JsonResponse

from notify.broker import bounded_connection

log = logging.getLogger("config.probes")

LIVENESS_PATH = "/healthz"
READINESS_PATH = "/readyz"
OK = "ok"

# The databases (host, port, name) seen with every migration applied, by this process. Its code
# and so its migrations never change while it runs, so once they are all applied the costly
# check (loading every migration file) is never made again: each later probe is one query.
_migrated: set[tuple[str, str, str]] = set()


class ProbeMiddleware:
    """Answer the two probe paths at once; pass every other request on untouched."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        path = request.path_info
        if path not in (LIVENESS_PATH, READINESS_PATH):
            return self.get_response(request)
        if request.method not in ("GET", "HEAD"):
            return HttpResponseNotAllowed(["GET", "HEAD"])
        if path == LIVENESS_PATH:
            return _answer(200, {"status": "alive"})
        checks = {"database": database_state(), "broker": broker_state()}
        failing = [name for name, state in checks.items() if state != OK]
        status = "not_ready" if failing else "ready"
        return _answer(503 if failing else 200, {"status": status, "failing": failing, **checks})


def _answer(status: int, body: dict[str, Any]) -> JsonResponse:
    response = JsonResponse(body, status=status)
    response["Cache-Control"] = "no-store"  # a cached "ready" would outlive the database it vouched for
    return response


def database_state() -> str:
    """``ok``, ``unreachable`` or ``migrations_pending``, on a connection of the probe's own.

    Its own, not the request thread's kept one: it is bounded (READYZ_DATABASE_TIMEOUT to
    connect and per statement), which the application's connections are not, so a database
    that stopped answering costs a probe seconds, not a web thread for minutes.
    """
    connection = _probe_connection()
    entry = connection.settings_dict
    database = (str(entry["HOST"]), str(entry["PORT"]), str(entry["NAME"]))
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        if database not in _migrated:
            executor = MigrationExecutor(connection)
            if executor.migration_plan(executor.loader.graph.leaf_nodes()):
                return "migrations_pending"
            _migrated.add(database)
    except DatabaseError as error:
        # The class only: a driver's message can carry a host, a user or a DSN.
        log.warning("not_ready", extra={"dependency": "database", "error": type(error).__name__})
        return "unreachable"
    finally:
        connection.close()
    return OK


def _probe_connection() -> BaseDatabaseWrapper:
    entry = copy.deepcopy(connections.settings[DEFAULT_DB_ALIAS])
    connection: BaseDatabaseWrapper = load_backend(entry["ENGINE"]).DatabaseWrapper(entry, DEFAULT_DB_ALIAS)
    if connection.vendor == "postgresql":
        timeout = settings.READYZ_DATABASE_TIMEOUT
        options = entry["OPTIONS"]
        # libpq counts whole seconds, and takes anything under 2 as 2.
        options["connect_timeout"] = max(2, math.ceil(timeout))
        bound = f"-c statement_timeout={round(timeout * 1000)}"
        options["options"] = f"{options['options']} {bound}" if options.get("options") else bound
    return connection


def broker_state() -> str:
    """``ok`` or ``unreachable``: whether the broker this process publishes wake-ups to takes a connection.

    Asked once, as a publish would ask it, within the publish's own bound
    (NOTIFY_BROKER_PUBLISH_TIMEOUT): on Redis that includes its answer to a PING.
    """
    try:
        with bounded_connection() as connection:
            connection.ensure_connection(max_retries=0)
    except Exception as error:  # kombu's, redis-py's, amqp's or the socket's: all mean "not now"
        log.warning("not_ready", extra={"dependency": "broker", "error": type(error).__name__})
        return "unreachable"
    return OK
