"""PagerDuty's rate limit: about 120 events a minute per routing key, over a sliding window."""

import hashlib
import math
from collections import defaultdict, deque

EVENTS_PER_WINDOW = 120
WINDOW_SECONDS = 60.0


class RateLimit:
    """The acceptances of the last ``WINDOW_SECONDS`` per routing key; refusals are not counted."""

    def __init__(self) -> None:
        # Keyed by a digest: the routing key is a credential and is kept nowhere.
        self._accepted: defaultdict[str, deque[float]] = defaultdict(deque)

    def admit(self, routing_key: str, now: float) -> int | None:
        """Count one more event for the key and return None, or return the seconds to wait (Retry-After)."""
        accepted = self._accepted[hashlib.sha256(routing_key.encode()).hexdigest()]
        while accepted and accepted[0] <= now - WINDOW_SECONDS:
            accepted.popleft()
        if len(accepted) >= EVENTS_PER_WINDOW:
            return max(1, math.ceil(accepted[0] + WINDOW_SECONDS - now))
        accepted.append(now)
        return None

    def clear(self) -> None:
        self._accepted.clear()
