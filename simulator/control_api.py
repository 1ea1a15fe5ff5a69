"""Serve the simulator's own control endpoints: counts, scripts, pager outages and log, reset (loopback only)."""

import ipaddress
import json
import logging
from collections.abc import Callable
from typing import TypeVar

from aiohttp import web
from aiohttp.typedefs import Handler

from simulator.fields import Fields
from simulator.pager_outage import parse_outage
from simulator.scripts import ScriptError, SmsScript, parse_script
from simulator.state import STATE, Redaction, SmtpPacing

log = logging.getLogger(__name__)
T = TypeVar("T")


def control_app() -> web.Application:
    """Return the control endpoints, to be mounted at ``/simulator/``."""
    app = web.Application(middlewares=[_loopback_only, _refusals])
    app.router.add_get("/counts", counts)
    app.router.add_post("/script", script)
    app.router.add_post("/reset", reset)
    app.router.add_post("/redaction", redaction)
    app.router.add_post("/smtp-pacing", smtp_pacing)
    app.router.add_post("/pager-outage", pager_outage)
    app.router.add_get("/pager-log", pager_log)
    return app


@web.middleware
async def _loopback_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    # No credentials guard these endpoints, so only this machine may use them even when the
    # simulator listens on a wider address.
    if request.remote is None or not ipaddress.ip_address(request.remote).is_loopback:
        return web.json_response({"error": "control endpoints answer loopback callers only"}, status=403)
    return await handler(request)


async def counts(request: web.Request) -> web.Response:
    """Return what was accepted per key, and the rejection and callback totals."""
    return web.json_response(request.config_dict[STATE].tally.snapshot())


class _Refused(Exception):
    """A control request whose body the simulator refuses (400)."""


async def _read(request: web.Request, parse: Callable[[object], T]) -> T:
    """Return the JSON body as ``parse`` reads it, or raise ``_Refused`` saying what is wrong."""
    try:
        return parse(json.loads(await request.text()))
    except json.JSONDecodeError:
        raise _Refused("the body must be a JSON object") from None
    except ScriptError as exc:
        raise _Refused(str(exc)) from None


@web.middleware
async def _refusals(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except _Refused as refused:
        return web.json_response({"error": str(refused)}, status=400)


async def script(request: web.Request) -> web.Response:
    """Script the behaviour of future messages to one destination."""
    parsed = await _read(request, parse_script)
    request.config_dict[STATE].planner.add(parsed)
    kind, steps = ("sms", parsed.create) if isinstance(parsed, SmsScript) else ("email", parsed.smtp)
    log.info("script set kind=%s steps=%s", kind, ",".join(steps))
    return web.Response(status=204)


def _redaction(data: object) -> Redaction:
    fields = Fields(data, "", ScriptError)
    chosen = Redaction(body=fields.flag("body", False), phone=fields.flag("phone", False))
    fields.finish()
    return chosen


def _pacing(data: object) -> SmtpPacing:
    fields = Fields(data, "", ScriptError)
    pacing = SmtpPacing(int(fields.non_negative("connections")), fields.non_negative("reply_delay"))
    fields.finish()
    return pacing


async def redaction(request: web.Request) -> web.Response:
    """Set the account's Message Redaction: ``{"body": bool, "phone": bool}``."""
    chosen = request.config_dict[STATE].redaction = await _read(request, _redaction)
    log.info("redaction set body=%s phone=%s", chosen.body, chosen.phone)
    return web.Response(status=204)


async def smtp_pacing(request: web.Request) -> web.Response:
    """Slow the next SMTP connections: ``{"connections": n, "reply_delay": seconds}`` before every reply."""
    pacing = request.config_dict[STATE].smtp_pacing = await _read(request, _pacing)
    log.info("smtp pacing set connections=%d reply_delay=%s", pacing.connections, pacing.reply_delay)
    return web.Response(status=204)


async def pager_outage(request: web.Request) -> web.Response:
    """Start a pager outage now: ``{"phases": [{"mode": ..., "seconds": ...}, ...]}``, then recovery."""
    phases = await _read(request, parse_outage)
    request.config_dict[STATE].pager.start_outage(phases)
    log.info("pager outage set phases=%s", ",".join(phase.describe() for phase in phases) or "none")
    return web.Response(status=204)


async def pager_log(request: web.Request) -> web.Response:
    """Return every message the pager stand-in was sent, in arrival order, with the answer it got."""
    return web.json_response({"messages": request.config_dict[STATE].pager.log})


async def reset(request: web.Request) -> web.Response:
    """Forget every message, count and script; end any pager outage."""
    request.config_dict[STATE].reset()
    log.info("reset")
    return web.Response(status=204)
