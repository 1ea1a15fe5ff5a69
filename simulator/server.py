"""Run the simulator: the HTTP APIs and the SMTP sink on one event loop, until SIGINT or SIGTERM."""

import asyncio
import random
import signal
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from simulator.account import Account
from simulator.callbacks import CallbackDispatcher
from simulator.control_api import control_app
from simulator.counts import Tally
from simulator.pager import pager_app
from simulator.planning import Planner
from simulator.profile import Profile
from simulator.sms import twilio_app
from simulator.smtp import PacedSMTP, SmtpSink
from simulator.state import STATE, SimulatorState, utc_now

# A callback target gets this long per attempt; a slow one must not pile up tasks forever.
CALLBACK_TIMEOUT_SECONDS = 5.0
# Hanging requests (the `hang` fault) are cut off this soon at shutdown.
SHUTDOWN_TIMEOUT_SECONDS = 1.0
SMTP_HOSTNAME = "simulator.invalid"


@dataclass(frozen=True)
class Listening:
    """The ports both servers ended up on (port 0 asks for an ephemeral one)."""

    http_port: int
    smtp_port: int


def build_app(state: SimulatorState) -> web.Application:
    """Return the HTTP application: the Twilio API, PagerDuty's Events v2 API and the control endpoints, one state."""
    app = web.Application()
    app[STATE] = state
    app.add_subapp("/2010-04-01/", twilio_app())
    app.add_subapp("/v2/", pager_app())
    app.add_subapp("/simulator/", control_app())
    return app


async def serve(
    *,
    host: str,
    http_port: int,
    smtp_port: int,
    account: Account,
    profile: Profile,
    seed: int | None,
    on_ready: Callable[[Listening], None],
) -> None:
    """Serve until SIGINT or SIGTERM; call ``on_ready`` once both servers listen."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    rng = random.Random(seed)
    tally = Tally()
    timeout = aiohttp.ClientTimeout(total=CALLBACK_TIMEOUT_SECONDS)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        callbacks = CallbackDispatcher(session, account, tally, rng, utc_now)
        state = SimulatorState(account, Planner(profile, rng), callbacks, tally, rng)
        # No access log: a list request's query string carries the destination number.
        runner = web.AppRunner(build_app(state), access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_SECONDS)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, http_port).start()
            # One protocol per connection: each takes its pace from the state when it opens.
            smtp_server = await loop.create_server(
                lambda: PacedSMTP(
                    SmtpSink(state), reply_delay=state.next_smtp_reply_delay(), hostname=SMTP_HOSTNAME, loop=loop
                ),
                host,
                smtp_port,
            )
            try:
                on_ready(Listening(http_port=runner.addresses[0][1], smtp_port=smtp_server.sockets[0].getsockname()[1]))
                await stop.wait()
            finally:
                smtp_server.close()
                await callbacks.close()
        finally:
            await runner.cleanup()
