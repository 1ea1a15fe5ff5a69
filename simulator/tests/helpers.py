"""Test helpers: a status-callback receiver on loopback, and a polling wait."""

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypeVar
from urllib.parse import parse_qsl

T = TypeVar("T")


@dataclass(frozen=True)
class Received:
    """One callback request as it arrived."""

    url: str
    headers: dict[str, str]
    params: dict[str, str]
    at: float


class CallbackReceiver:
    """Record every POST; answer 500 to the first ``failures`` of them, 204 to the rest."""

    def __init__(self, server: ThreadingHTTPServer) -> None:
        self._server = server
        self._lock = threading.Lock()
        self._received: list[Received] = []
        self.failures = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def url(self, event_id: str) -> str:
        return f"{self.base_url}/callbacks/twilio/sms/{event_id}"

    @property
    def received(self) -> list[Received]:
        with self._lock:
            return list(self._received)

    def wait_for(self, count: int, timeout: float = 5.0) -> list[Received]:
        """Return what was received once at least ``count`` requests came."""
        return wait_for(lambda: received if len(received := self.received) >= count else None, timeout)

    def statuses(self) -> list[str]:
        return [request.params["MessageStatus"] for request in self.received]

    def record(self, request: Received) -> int:
        with self._lock:
            self._received.append(request)
            answer = 500 if self.failures else 204
            self.failures = max(self.failures - 1, 0)
            return answer


def _handler(receiver: "CallbackReceiver") -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            params = dict(parse_qsl(self.rfile.read(length).decode()))
            received = Received(receiver.base_url + self.path, dict(self.headers), params, time.monotonic())
            self.send_response(receiver.record(received))
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            """Keep test output quiet."""

    return Handler


@contextmanager
def running_receiver() -> Iterator[CallbackReceiver]:
    """Run a receiver on an ephemeral loopback port for the duration of the block."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    receiver = CallbackReceiver(server)
    server.RequestHandlerClass = _handler(receiver)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


def wait_for(probe: Callable[[], T | None], timeout: float = 5.0) -> T:
    """Return the first value ``probe()`` gives other than None, polling for up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (value := probe()) is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"nothing came within {timeout}s")
        time.sleep(0.02)
    return value


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Return once ``condition()`` holds, polling for up to ``timeout`` seconds."""
    wait_for(lambda: True if condition() else None, timeout)
