"""Serve the simulator's own control endpoints: counts, scripts and reset (loopback callers only)."""

import ipaddress
import json
import logging

from aiohttp import web
from aiohttp.typedefs import Handler

from notify.simulator.scripts import ScriptError, SmsScript, parse_script
from notify.simulator.state import STATE

log = logging.getLogger(__name__)


def control_app() -> web.Application:
    """Return the control endpoints, to be mounted at ``/simulator/``."""
    app = web.Application(middlewares=[_loopback_only])
    app.router.add_get("/counts", counts)
    app.router.add_post("/script", script)
    app.router.add_post("/reset", reset)
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


async def script(request: web.Request) -> web.Response:
    """Script the behaviour of future messages to one destination."""
    try:
        parsed = parse_script(json.loads(await request.text()))
    except json.JSONDecodeError:
        return web.json_response({"error": "the body must be a JSON object"}, status=400)
    except ScriptError as exc:
        return web.json_response({"error": str(exc)}, status=400)
    request.config_dict[STATE].planner.add(parsed)
    kind, steps = ("sms", parsed.create) if isinstance(parsed, SmsScript) else ("email", parsed.smtp)
    log.info("script set kind=%s steps=%s", kind, ",".join(steps))
    return web.Response(status=204)


async def reset(request: web.Request) -> web.Response:
    """Forget every message, count and script."""
    request.config_dict[STATE].reset()
    log.info("reset")
    return web.Response(status=204)
