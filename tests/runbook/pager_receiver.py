"""A real local HTTP server standing in for PagerDuty's Events v2 endpoint."""

import json
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from runbook.paging.invariants import Received


class Receiver:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []  # the accepted ones
        self.log: list[Received] = []  # every message that arrived, with the answer it got
        self.status = 202
        self.delay = 0.0  # seconds before answering: longer than PAGER_TIMEOUT loses the answer
        self.retry_after: str | None = None  # the Retry-After header of a 429
        self.dribble = 0.0  # if set, the answer comes one byte per this many seconds
        self.in_flight = self.most_in_flight = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v2/enqueue"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _handler(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver._lock:
                    receiver.in_flight += 1
                    receiver.most_in_flight = max(receiver.most_in_flight, receiver.in_flight)
                try:
                    self._answer(body)
                finally:
                    with receiver._lock:
                        receiver.in_flight -= 1

            def _answer(self, body):
                message, arrived = json.loads(body), datetime.now(UTC)
                status = 0 if receiver.dribble else receiver.status  # 0: no whole answer ever
                receiver.log.append(Received(message["event_action"], message["dedup_key"], arrived, status))
                time.sleep(receiver.delay)
                if receiver.status == 202:
                    receiver.messages.append(message)
                if receiver.dribble:
                    try:
                        for byte in b"HTTP/1.1 202 Accepted\r\n\r\n":
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                            time.sleep(receiver.dribble)
                    except OSError:  # the client gave up and cut the connection
                        pass
                    return
                self.send_response(receiver.status)
                if receiver.retry_after is not None:
                    self.send_header("Retry-After", receiver.retry_after)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"status": "success", "message": "Event processed"}')

            def log_message(self, *args):
                pass

        return Handler

    def actions(self) -> list[tuple[str, str]]:
        return [(message["event_action"], message["dedup_key"]) for message in self.messages]

    def wait_for(self, count: int, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.messages) < count and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def pager_receiver(settings):
    receiver = Receiver()
    settings.PAGER_EVENTS_URL = receiver.url
    settings.PAGER_ROUTING_KEYS = {"US": "routing-key-us", "EU": "routing-key-eu"}
    yield receiver
    receiver.stop()
