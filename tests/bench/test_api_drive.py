"""The API benchmark's closed-loop drive spreads its load: each client's connection serves a bounded
number of requests, so no server process keeps the connections it happened to accept at the start."""

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from bench import api

Handler = Callable[[web.Request], Awaitable[web.Response]]


@asynccontextmanager
async def serving(path: str, handler: Handler) -> AsyncIterator[int]:
    """A local aiohttp server answering GET ``path`` with ``handler``; yields its port."""
    app = web.Application()
    app.router.add_get(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


def drive_against_a_counting_server() -> Counter[tuple[str, int]]:
    # A thread of its own: a test before may leave this thread's event loop running.
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(asyncio.run, _drive_against_a_counting_server()).result()


async def _drive_against_a_counting_server() -> Counter[tuple[str, int]]:
    served: Counter[tuple[str, int]] = Counter()

    async def whoami(request: web.Request) -> web.Response:
        served[request.transport.get_extra_info("peername")] += 1  # type: ignore[union-attr]
        return web.json_response({"service": "bench"})

    async with serving("/api/v1/whoami", whoami) as port:
        load = await api._drive("ceiling", port, "token")
    assert load.requests == sum(served.values()) > 0
    return served


def test_each_connection_of_a_drive_serves_at_most_reconnect_every_requests(monkeypatch):
    monkeypatch.setattr(api, "SECONDS", 0.5)
    monkeypatch.setattr(api, "CONCURRENCY", 2)
    monkeypatch.setattr(api, "RECONNECT_EVERY", 5)

    served = drive_against_a_counting_server()

    assert max(served.values()) <= 5
    assert len(served) > 2  # the two clients opened connection after connection


@pytest.mark.parametrize("reconnect_every", [1, 3])
def test_a_connection_is_used_for_as_many_requests_as_it_may(monkeypatch, reconnect_every):
    monkeypatch.setattr(api, "SECONDS", 0.3)
    monkeypatch.setattr(api, "CONCURRENCY", 1)
    monkeypatch.setattr(api, "RECONNECT_EVERY", reconnect_every)

    served = drive_against_a_counting_server()

    # Kept alive up to the bound: every connection but the last one cut short served exactly it.
    assert sorted(served.values())[1:] == [reconnect_every] * (len(served) - 1)


async def _beside_heavy_against_a_recording_server(clients: int) -> tuple[list[str], int, int]:
    """What the server saw, in order: 'drive' when the drive started and ended, 'heavy' for each
    heavy page served; and how many heavy requests were in flight at most, and at the end."""
    seen: list[str] = []
    in_flight = [0, 0]  # now, most

    async def heavy(request: web.Request) -> web.Response:
        in_flight[0] += 1
        in_flight[1] = max(in_flight[1], in_flight[0])
        await asyncio.sleep(0.01)  # a page that takes a while
        in_flight[0] -= 1
        seen.append("heavy")
        return web.json_response({"openapi": "3.1.0"})

    async def drive() -> api.Load:
        seen.append("drive")
        await asyncio.sleep(0.2)
        seen.append("drive")
        return api.Load(1.0, 1.0, 1.0, cpu_ms=0.0)

    async with serving(api.HEAVY_PATH, heavy) as port:
        await api._beside_heavy(port, clients, drive())
        after = in_flight[0]
    return seen, in_flight[1], after


def test_heavy_pages_are_fetched_all_through_the_drive_and_stop_with_it():
    with ThreadPoolExecutor(max_workers=1) as thread:
        seen, most, after = thread.submit(asyncio.run, _beside_heavy_against_a_recording_server(3)).result()

    started, ended = seen.index("drive"), len(seen) - 1 - seen[::-1].index("drive")
    assert seen[started + 1 : ended].count("heavy") >= 3 * 5  # three clients, 0.2 s of 10 ms pages each
    assert most == 3  # each client one request after another
    assert after == 0  # none left running once the drive returned
