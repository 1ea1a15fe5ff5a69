"""Serve Twilio's Messages API (create, fetch, list) for the one simulated account.

Logs name sids, event keys, statuses and fault names only: never a number or a body.
"""

import asyncio
import dataclasses
import hmac
import logging

from aiohttp import BasicAuth, web
from aiohttp.typedefs import Handler

from simulator.faults import CreateFault
from simulator.listing import ListQueryError, page_body, select
from simulator.messages import SmsMessage, new_sid
from simulator.planning import SmsPlan
from simulator.resources import TwilioError, message_resource
from simulator.state import STATE, SimulatorState

log = logging.getLogger(__name__)

_SERVER_ERROR = TwilioError(500, 20500, "An internal server error has occurred")
_FAULT_ERRORS = {
    CreateFault.REJECT: TwilioError(400, 21211, "The 'To' number is not a valid phone number."),
    CreateFault.RATE_LIMITED: TwilioError(429, 20429, "Too Many Requests"),
    CreateFault.SERVER_ERROR: _SERVER_ERROR,
    CreateFault.ACCEPT_THEN_500: _SERVER_ERROR,
}
_UNAUTHORIZED = TwilioError(401, 20003, "Authentication Error - invalid username or password")


def twilio_app() -> web.Application:
    """Return the API, to be mounted at ``/2010-04-01/``."""
    app = web.Application(middlewares=[_count_connections, _authenticate])
    app.router.add_post("/Accounts/{account}/Messages.json", create_message)
    app.router.add_get("/Accounts/{account}/Messages.json", list_messages)
    app.router.add_get("/Accounts/{account}/Messages/{sid}.json", fetch_message)
    return app


@web.middleware
async def _count_connections(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Count the client connections the API is called over (a kept-alive one serves many requests)."""
    peer = request.transport.get_extra_info("peername") if request.transport is not None else None
    request.config_dict[STATE].tally.sms_api_peers.add(str(peer))
    return await handler(request)


@web.middleware
async def _authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Let through only HTTP basic auth with the account's sid and token, on that account's URLs."""
    account = request.config_dict[STATE].account
    try:
        given = BasicAuth.decode(request.headers.get("Authorization", ""))
    except ValueError:
        given = None
    if given is None or not (
        hmac.compare_digest(given.login, account.sid) and hmac.compare_digest(given.password, account.auth_token)
    ):
        log.warning("api refused: bad credentials")
        response = _UNAUTHORIZED.response()
        response.headers["WWW-Authenticate"] = 'Basic realm="Twilio API"'
        return response
    if request.match_info.get("account") != account.sid:
        return _not_found(request)
    return await handler(request)


async def create_message(request: web.Request) -> web.StreamResponse:
    """Accept (or, per the plan, refuse or mishandle) one message."""
    state = request.config_dict[STATE]
    form = {key: value for key, value in (await request.post()).items() if isinstance(value, str) and value}
    missing = _missing_field(form)
    if missing:
        state.tally.sms_rejected += 1
        log.info("sms refused fault=missing_field code=%d", missing.code)
        return missing.response()
    plan = state.planner.plan_sms(form["To"])
    if not plan.create.accepts:
        state.tally.sms_rejected += 1
        log.info("sms refused fault=%s", plan.create)
        return _FAULT_ERRORS[plan.create].response()
    if plan.create is CreateFault.ACCEPT_LATE:
        # Still processing: the message exists only once the hold is over, whatever the
        # client does meanwhile (shielded: a client that gives up does not cancel it).
        message = await asyncio.shield(_create_late(state, form, plan))
    else:
        message = _create(state, form, plan)
    log.info(
        "sms accepted sid=%s key=%s fault=%s statuses=%s callbacks=%s",
        message.sid,
        message.key,
        plan.create,
        ",".join(change.status for change in plan.timeline) or "none",
        plan.callbacks,
    )
    return await _answer_create(request, state, message, plan)


def _create(state: SimulatorState, form: dict[str, str], plan: SmsPlan) -> SmsMessage:
    message = SmsMessage(
        sid=new_sid(state.rng, "SM"),
        to=form["To"],
        from_=form.get("From"),
        body=form["Body"],
        messaging_service_sid=form.get("MessagingServiceSid"),
        status_callback=form.get("StatusCallback"),
        created_at=state.clock(),
        timeline=plan.timeline,
        retains_content=form.get("ContentRetention", "retain") != "discard",
    )
    state.accept(message, plan)
    return message


async def _create_late(state: SimulatorState, form: dict[str, str], plan: SmsPlan) -> SmsMessage:
    await asyncio.sleep(plan.hang_seconds)
    state.tally.sms_accepted_late += 1
    return _create(state, form, plan)


async def _answer_create(
    request: web.Request, state: SimulatorState, message: SmsMessage, plan: SmsPlan
) -> web.StreamResponse:
    match plan.create:
        case CreateFault.ACCEPT_THEN_DROP:
            # Close before a byte of the response: the client cannot know the message was accepted.
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=500)  # never reaches the closed connection
        case CreateFault.ACCEPT_THEN_500:
            return _SERVER_ERROR.response()
        case CreateFault.HANG:
            await asyncio.sleep(plan.hang_seconds)
    # Twilio answers a create with the message as created (queued or accepted), even when
    # its next status is due at once: later statuses are only seen by fetch, list and callbacks.
    as_created = dataclasses.replace(message, timeline=())
    return web.json_response(message_resource(as_created, state.account.sid, message.created_at), status=201)


async def fetch_message(request: web.Request) -> web.StreamResponse:
    """Return one message with its status as of now."""
    state = request.config_dict[STATE]
    message = state.messages.get(request.match_info["sid"])
    if message is None:
        return _not_found(request)
    return web.json_response(message_resource(message, state.account.sid, state.clock(), state.redaction))


async def list_messages(request: web.Request) -> web.StreamResponse:
    """Return one page of messages, newest first, filtered by To, From and DateSent."""
    state = request.config_dict[STATE]
    now = state.clock()
    try:
        result = select(reversed(state.messages.values()), request.query, now)
    except ListQueryError as exc:
        return TwilioError(400, 20001, str(exc)).response()
    resources = [message_resource(message, state.account.sid, now, state.redaction) for message in result.records]
    return web.json_response(page_body(result, resources, request.path, request.query))


def _missing_field(form: dict[str, str]) -> TwilioError | None:
    if "To" not in form:
        return TwilioError(400, 21604, "A 'To' phone number is required.")
    if "From" not in form and "MessagingServiceSid" not in form:
        return TwilioError(400, 21603, "A 'From' phone number is required.")
    if "Body" not in form:
        return TwilioError(400, 21602, "Message body is required.")
    return None


def _not_found(request: web.Request) -> web.Response:
    return TwilioError(404, 20404, f"The requested resource {request.path} was not found").response()
