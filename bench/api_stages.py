"""Where a creation's web CPU goes inside a whole request, beside a whoami's and a callback's.

The parts in isolation (``bench/api_parts.py``) sum to under half of what a creation costs the
web over HTTP: a part timed alone, over and over, runs with its code and data warm in the CPU's
caches, and leaves out Django's handler, the middleware and ninja. Here whole requests go through
Django's handler in this process (its test client: no socket, no gunicorn), creations, whoamis
and callbacks in turn, and each stage of the real path is charged the CPU (``time.process_time``)
spent inside it. A stage is the real function, wrapped for the run only.
"""

import json
import random
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any
from unittest import mock
from urllib.parse import urlencode

from django.core.handlers.base import BaseHandler
from django.test import Client
from ninja.operation import Operation

from bench.api import creation_body, pending_sms_events, signed_callback
from notify import callbacks
from notify.api import events as api_events
from notify.models import ServiceToken
from notify.writes import create, moves, wake_ups
from plumbing.clock import current_clock

REQUESTS = 300  # of each kind, per round
ROUNDS = 2  # the last one reported: the first warms every path
WHOLE = "whole request"
FORM = "application/x-www-form-urlencoded"
# (stage, owner, attribute): each a function the request really calls, found where it looks it up.
STAGES: tuple[tuple[str, Any, str], ...] = (
    (WHOLE, BaseHandler, "get_response"),
    ("token check and rate limits (ninja's checks)", Operation, "_run_checks"),
    ("body parse and validation (ninja, pydantic)", Operation, "_get_values"),
    ("create_event", api_events, "create_event"),
    ("  of which destinations checked", create, "checked_destinations"),
    ("  of which rows built and the INSERT", create, "insert_together"),
    ("  of which the wake-up published", wake_ups, "publish"),
    ("response (ninja's schema and JSON)", Operation, "_result_to_response"),
    ("signature check and form parse", callbacks, "_signed_by_twilio"),
    ("transition (observation, CAS, claim)", moves, "record_receipt"),
)
TOP_LEVEL = tuple(name for name, _, _ in STAGES if name != WHOLE and not name.startswith(" "))


@dataclass(frozen=True)
class Stages:
    """CPU ms per request, by stage, for each kind of request ('creation', 'whoami', 'callback')."""

    per_request: dict[str, dict[str, float]]

    def total(self, kind: str) -> float:
        return self.per_request[kind][WHOLE]


def run() -> Stages:
    # A service of its own each run: its client keys (seeded) are then new to it.
    service = f"bench-stages-{uuid.uuid4().hex[:12]}"
    token = ServiceToken.issue(service, now=current_clock().now())[1]
    client = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {token}")
    rng = random.Random("stages")
    pending = iter(pending_sms_events(REQUESTS * ROUNDS, service))

    def creation() -> None:
        body = json.dumps(creation_body(rng))
        _expect(201, client.post("/api/v1/events", body, content_type="application/json"))

    def whoami() -> None:
        _expect(200, client.get("/api/v1/whoami"))

    def callback() -> None:
        signed = signed_callback(*next(pending), "delivered")
        form = urlencode(signed.params)  # as Twilio posts it, not the test client's multipart
        posted = client.post(signed.path, form, content_type=FORM, headers={"X-Twilio-Signature": signed.signature})
        _expect(204, posted)

    kinds: dict[str, Callable[[], None]] = {"creation": creation, "whoami": whoami, "callback": callback}
    spent: defaultdict[str, float] = defaultdict(float)
    per_request: dict[str, dict[str, float]] = {}
    with _charged_to(spent):
        for _ in range(ROUNDS):
            for kind, request in kinds.items():
                spent.clear()
                for _ in range(REQUESTS):
                    request()
                per_request[kind] = {name: spent[name] * 1000 / REQUESTS for name, _, _ in STAGES}
    return Stages(per_request)


@contextmanager
def _charged_to(spent: defaultdict[str, float]) -> Iterator[None]:
    """Every stage's function wrapped to add the CPU time spent inside it to ``spent``."""
    with ExitStack() as stack:
        for name, owner, attribute in STAGES:
            stack.enter_context(mock.patch.object(owner, attribute, _timed(name, getattr(owner, attribute), spent)))
        yield


def _timed(name: str, function: Callable[..., Any], spent: defaultdict[str, float]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[name] += time.process_time() - started

    return timed


def _expect(status: int, response: Any) -> None:
    if response.status_code != status:
        raise SystemExit(f"stages: expected {status}, got {response.status_code}: {response.content[:200]!r}")


def table(stages: Stages) -> str:
    kinds = list(stages.per_request)

    def row(name: str, values: list[float]) -> str:
        return f"| {name} | {' | '.join(f'{value:.3f} ms' if value else '-' for value in values)} |"

    header = f"| inside a request (Django's handler, this process) | {' | '.join(kinds)} |"
    lines = [header, "|---" * (1 + len(kinds)) + "|"]
    for name, _, _ in STAGES:
        values = [stages.per_request[kind][name] for kind in kinds]
        if any(values):
            lines.append(row(name, values))
    rest = [stages.total(kind) - sum(stages.per_request[kind][name] for name in TOP_LEVEL) for kind in kinds]
    lines.append(row("the rest (Django's handler, middleware, ninja, the view)", rest))
    return "\n".join(lines)
