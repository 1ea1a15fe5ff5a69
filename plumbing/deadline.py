"""One deadline for a whole remote exchange: name lookup, connect, TLS and every reply together.

Client libraries time each connect and each read on its own, so a peer that answers every
step just inside its timeout keeps a call going for many timeouts, and a name lookup has
none. A worker's lease must outlive its call, so the call gets one deadline: each step's
timeout shrinks to the time left, the lookup runs where it can be abandoned, and a watchdog
cuts the connection at the deadline whatever the peer does (a reply dribbled out a byte
at a time resets no per-read timer it does not see).
"""

import contextlib
import ipaddress
import socket
import threading
import time
from collections.abc import Callable
from datetime import timedelta


class DeadlinePassed(TimeoutError):
    """The exchange ran out of time."""


class Deadline:
    def __init__(self, within: timedelta) -> None:
        self._ends = time.monotonic() + within.total_seconds()
        # Guards the watched list against the watchdog's thread: a socket watched after the
        # cut is cut at once, and none is cut once watching has stopped.
        self._lock = threading.Lock()
        self._watched: list[Callable[[], socket.socket | None]] = []
        self._watchdog: threading.Timer | None = None
        self._cut = self._stopped = False

    def remaining(self) -> float:
        return self._ends - time.monotonic()

    def clip(self, timeout: float | None) -> float:
        """Return ``timeout`` shortened to the time left; raise ``DeadlinePassed`` if none is."""
        left = self.remaining()
        if left <= 0:
            raise DeadlinePassed("deadline passed")
        return left if timeout is None else min(timeout, left)

    def resolve(self, host: str, port: int) -> str:
        """Return an address for ``host``, giving up on the lookup at the deadline."""
        try:
            ipaddress.ip_address(host)
        except ValueError:
            pass
        else:
            return host
        found: list[str] = []
        failed: list[OSError] = []
        done = threading.Event()

        def look_up() -> None:
            try:
                found.append(str(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][4][0]))
            except OSError as error:
                failed.append(error)
            finally:
                done.set()

        # getaddrinfo takes no timeout: run it in a thread that may be left behind.
        threading.Thread(target=look_up, name="deadline-lookup", daemon=True).start()
        if not done.wait(self.clip(None)):
            raise DeadlinePassed("name lookup took longer than the deadline")
        if failed:
            raise failed[0]
        return found[0]

    def watch(self, current_socket: Callable[[], socket.socket | None]) -> None:
        """At the deadline, shut down whatever socket ``current_socket`` returns then (TLS may replace it).

        Watch each connection as soon as it has a socket, before its first read (a greeting
        dribbled line by line is as slow as any other reply), and a kept connection again
        under each new deadline.
        """
        with self._lock:
            if self._stopped:
                return
            self._watched.append(current_socket)
            if self._cut:  # the deadline passed before this connection was watched
                _shut(current_socket)
            elif self._watchdog is None:
                self._watchdog = threading.Timer(max(self.remaining(), 0), self._cut_all)
                self._watchdog.daemon = True
                self._watchdog.start()

    def stop_watching(self) -> None:
        with self._lock:
            self._stopped = True
            self._watched.clear()
            if self._watchdog is not None:
                self._watchdog.cancel()

    def _cut_all(self) -> None:
        with self._lock:
            self._cut = True
            for current_socket in self._watched:
                _shut(current_socket)


def _shut(current_socket: Callable[[], socket.socket | None]) -> None:
    sock = current_socket()
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed: nothing to cut
            sock.shutdown(socket.SHUT_RDWR)
