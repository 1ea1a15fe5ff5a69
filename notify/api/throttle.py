"""Rate limits: each service gets ``API_RATE_LIMIT`` requests, whatever its token; each client
address gets ``API_AUTH_FAILURES_PER_CLIENT`` requests without a valid token."""

from django.conf import settings
from django.http import HttpRequest
from ninja.errors import Throttled
from ninja.throttling import SimpleRateThrottle

from notify.models import ServiceToken
from notify.ratelimit import FailureCount

AUTH_FAILURES = FailureCount("api-auth", "API_AUTH_FAILURES_PER_CLIENT")


class TooManyAuthFailures(Throttled):
    """An address that sent too many requests without a valid token, refused before any lookup."""


class PerService(SimpleRateThrottle):
    def __init__(self) -> None:
        super().__init__(settings.API_RATE_LIMIT)

    def allow_request(self, request: HttpRequest) -> bool:
        # Read the limit per request, not once at import: it is configuration, not code.
        self.rate = settings.API_RATE_LIMIT
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request)

    def get_cache_key(self, request: HttpRequest) -> str | None:
        token = getattr(request, "auth", None)
        if not isinstance(token, ServiceToken):
            return None  # unauthenticated requests are refused before this matters
        return f"api-throttle:{token.service}"
