"""A pause after a failure: for a few seconds a process skips a call to a server that just failed.

For the hints a request can go on without (a wake-up on the broker, a rate limit's count in
Redis): while such a server is down or hangs, every call waits out its timeout, so after one
failure this process skips the call for a while, then tries again.

Lock-free on purpose. The circuit breaker this replaces (pybreaker) held its lock across the
call it guarded, so every thread of a process waited its turn at the broker or the store, in
normal running too, and all the callers in flight when the server hung waited one after the
other. Here the threads in flight when the first failure comes each wait out their own timeout;
those after it skip.
"""

import time


class Pause:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._until = 0.0

    def active(self) -> bool:
        # Wall-clock time, so that tests can move it; a clock set back does not make it longer.
        left = self._until - time.time()
        return 0 < left <= self.seconds

    def start(self) -> None:
        self._until = time.time() + self.seconds
