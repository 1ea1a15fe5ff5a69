"""Service authentication: ``Authorization: Bearer <token>``, checked against stored digests."""

from datetime import timedelta

from django.http import HttpRequest
from ninja.security import HttpBearer

from notify.api.throttle import AUTH_FAILURES, TooManyAuthFailures, counted
from notify.models import ServiceToken
from notify.models.service_token import digest
from plumbing.clock import current_clock
from plumbing.ratelimit import client_address

# "Last used" is for humans auditing tokens: minute precision spares a write per request.
LAST_USED_PRECISION = timedelta(minutes=1)

_LIVE_TOKEN = "SELECT * FROM notify_servicetoken WHERE digest = %s AND revoked_at IS NULL"


class ServiceTokenAuth(HttpBearer):
    def __call__(self, request: HttpRequest) -> ServiceToken | None:
        """Authenticate the request, refusing an address that has failed too often before looking.

        1. An address over ``API_AUTH_FAILURES_PER_CLIENT`` gets 429 here, before the
           digest lookup: a flood of bad tokens costs one cache read each, no query.
        2. Otherwise the bearer token is looked up (our own header parsing: ninja's logs
           the whole header, token included, when DEBUG is on).
        3. A missing, unknown or revoked token counts against the address.
        """
        address = client_address(request)
        # Counted in Redis, which may be down or slow: then the token is looked up all the same.
        wait = counted("auth_failures", lambda: AUTH_FAILURES.retry_after(address), otherwise=None)
        if wait is not None:
            raise TooManyAuthFailures(wait)
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        found = self.authenticate(request, token.strip()) if scheme.lower() == "bearer" and token.strip() else None
        if found is None:
            counted("auth_failures", lambda: AUTH_FAILURES.add(address), otherwise=None)
        return found

    def authenticate(self, request: HttpRequest, token: str) -> ServiceToken | None:
        # Raw SQL: every request asks, and compiling the ORM query cost more CPU than the lookup.
        found = next(iter(ServiceToken.objects.raw(_LIVE_TOKEN, [digest(token)])), None)
        if found is None:
            return None
        now = current_clock().now()
        if found.last_used_at is None or found.last_used_at < now - LAST_USED_PRECISION:
            ServiceToken.objects.filter(pk=found.pk).update(last_used_at=now)
        return found
