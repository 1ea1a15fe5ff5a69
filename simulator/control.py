"""Drive a running simulator from synchronous code: tests, the chaos run, benchmarks."""

import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any, cast

from simulator.counts import Counts
from simulator.pager_state import PagerLogEntry


class SimulatorControlError(RuntimeError):
    """The simulator refused a control request (an invalid script, say)."""


class SimulatorControl:
    """A client for the ``/simulator/`` endpoints of the simulator at ``base_url``."""

    def __init__(self, base_url: str, *, timeout: float = 5.0) -> None:
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout

    def counts(self) -> Counts:
        """Return the accepted messages per key and the rejection and callback totals."""
        return cast(Counts, json.loads(self._request("GET", "counts")))

    def script_sms(
        self,
        to: str,
        *,
        create: Sequence[str] | None = None,
        statuses: Sequence[tuple[str, float]] | None = None,
        callbacks: str | None = None,
        callback_delay: float | None = None,
        hang_seconds: float | None = None,
    ) -> None:
        """Script future create calls to ``to``; ``None`` leaves a field to its default or the profile."""
        self._script(
            to=to,
            create=None if create is None else list(create),
            statuses=None if statuses is None else [list(pair) for pair in statuses],
            callbacks=callbacks,
            callback_delay=callback_delay,
            hang_seconds=hang_seconds,
        )

    def script_email(
        self, address: str, *, smtp: Sequence[str] | None = None, hang_seconds: float | None = None
    ) -> None:
        """Script future messages to ``address``; ``None`` leaves a field to its default or the profile."""
        self._script(email=address, smtp=None if smtp is None else list(smtp), hang_seconds=hang_seconds)

    def redact(self, *, body: bool = False, phone: bool = False) -> None:
        """Set the account's Message Redaction: bodies hidden once sent, numbers' last four digits masked."""
        self._request("POST", "redaction", json.dumps({"body": body, "phone": phone}).encode())

    def pace_smtp(self, *, connections: int, reply_delay: float) -> None:
        """Make the next ``connections`` SMTP connections wait ``reply_delay`` seconds before every reply."""
        body = {"connections": connections, "reply_delay": reply_delay}
        self._request("POST", "smtp-pacing", json.dumps(body).encode())

    def pager_outage(self, phases: Sequence[Mapping[str, object]]) -> None:
        """Start a pager outage now, one phase after another, e.g. ``[{"mode": "timeout", "seconds": 4}]``.

        Modes: ``timeout`` (held ``hang_seconds`` without an answer, the message dropped),
        ``throttle`` (429 with ``retry_after``), ``error`` (a 5xx ``status``). After the last
        phase the pager takes messages again; an empty list ends an outage now.
        """
        self._request("POST", "pager-outage", json.dumps({"phases": [dict(phase) for phase in phases]}).encode())

    def pager_log(self) -> list[PagerLogEntry]:
        """Return every message the pager stand-in was sent, in arrival order, with the answer it got."""
        return cast(list[PagerLogEntry], json.loads(self._request("GET", "pager-log"))["messages"])

    def reset(self) -> None:
        """Forget every message, count, script and account setting; end any pager outage."""
        self._request("POST", "reset")

    def wait_until_up(self, timeout: float = 10.0) -> None:
        """Return once the simulator answers, or raise ``TimeoutError`` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.counts()
                return
            except OSError:  # refused or reset while it starts; URLError is an OSError
                if time.monotonic() > deadline:
                    raise TimeoutError(f"simulator at {self._base_url} not up after {timeout}s") from None
                time.sleep(0.05)

    def _script(self, **fields: Any) -> None:
        body = {key: value for key, value in fields.items() if value is not None}
        self._request("POST", "script", json.dumps(body).encode())

    def _request(self, method: str, endpoint: str, body: bytes | None = None) -> bytes:
        request = urllib.request.Request(
            f"{self._base_url}/simulator/{endpoint}",
            data=body,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                content: bytes = response.read()
                return content
        except urllib.error.HTTPError as exc:
            raise SimulatorControlError(f"{method} /simulator/{endpoint}: {_error_text(exc)}") from None


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(exc.read())["error"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {exc.code}"
