"""Serve a PagerDuty Events v2 endpoint (``POST /v2/enqueue``): validation, rate limit, outages, a log.

Every message that arrives is logged with the answer it got (``GET /simulator/pager-log``),
so a paging proof can check what the pager really took. The simulator's own log names the
action, the dedup key and the answer only: never the routing key (a credential) nor the
payload.
"""

import asyncio
import json
import logging
import uuid
from http import HTTPStatus

from aiohttp import web

from simulator.events_v2 import InvalidEvent, parse_event
from simulator.faults import PagerFault
from simulator.pager_outage import Phase
from simulator.pager_state import NO_ANSWER, PagerOutcome
from simulator.state import STATE

log = logging.getLogger(__name__)


def pager_app() -> web.Application:
    """Return the Events v2 API, to be mounted at ``/v2/``."""
    app = web.Application()
    app.router.add_post("/enqueue", enqueue)
    return app


async def enqueue(request: web.Request) -> web.StreamResponse:
    """Take one event, unless an outage, its invalidity or the rate limit says otherwise."""
    pager = request.config_dict[STATE].pager
    arrived = pager.clock()
    try:
        data: object = json.loads(await request.text())
    except json.JSONDecodeError:
        data = None
    sent = data if isinstance(data, dict) else {}
    action, dedup_key = _as_text(sent.get("event_action")), _as_text(sent.get("dedup_key"))

    def answer(status: int, outcome: PagerOutcome, key: str = dedup_key) -> None:
        pager.record(action, key, arrived, status, outcome)
        log.info("pager %s dedup_key=%s status=%d outcome=%s", action or "-", key or "-", status, outcome)

    # An outage is in front of the pager (a load balancer, the pager down): nothing is validated.
    phase = pager.phase_now()
    if phase is not None:
        # Logged as the phase's mode: each outage mode has the outcome of the same name.
        answer(NO_ANSWER if phase.mode is PagerFault.TIMEOUT else _outage_status(phase), PagerOutcome(phase.mode.value))
        return await _outage_answer(request, phase)
    try:
        event = parse_event(data)
    except InvalidEvent as invalid:
        answer(HTTPStatus.BAD_REQUEST, PagerOutcome.INVALID)
        body = {"status": "invalid event", "message": "Event object is invalid", "errors": invalid.errors}
        return web.json_response(body, status=HTTPStatus.BAD_REQUEST)
    wait = pager.limit.admit(event.routing_key, pager.monotonic())
    if wait is not None:
        answer(HTTPStatus.TOO_MANY_REQUESTS, PagerOutcome.RATE_LIMITED)
        return _throttled(wait)
    # PagerDuty keys a trigger sent without a dedup_key itself, and says which key it chose.
    key = event.dedup_key or uuid.uuid4().hex
    answer(HTTPStatus.ACCEPTED, PagerOutcome.ACCEPTED, key)
    body = {"status": "success", "message": "Event processed", "dedup_key": key}
    return web.json_response(body, status=HTTPStatus.ACCEPTED)


def _outage_status(phase: Phase) -> int:
    return HTTPStatus.TOO_MANY_REQUESTS if phase.mode is PagerFault.THROTTLE else phase.status


async def _outage_answer(request: web.Request, phase: Phase) -> web.StreamResponse:
    match phase.mode:
        case PagerFault.TIMEOUT:
            # Hold past the client's deadline, then drop without a byte of answer.
            await asyncio.sleep(phase.hang_seconds)
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=HTTPStatus.GATEWAY_TIMEOUT)  # never reaches the closed connection
        case PagerFault.THROTTLE:
            return _throttled(phase.retry_after)
        case PagerFault.ERROR:
            http_status = HTTPStatus(phase.status)
            return web.json_response({"status": "error", "message": http_status.phrase}, status=http_status)


def _throttled(retry_after: int) -> web.Response:
    body = {"status": "throttle event", "message": "Too many API calls at a time"}
    return web.json_response(body, status=HTTPStatus.TOO_MANY_REQUESTS, headers={"Retry-After": str(retry_after)})


def _as_text(value: object) -> str:
    return value if isinstance(value, str) else ""
