"""Service authentication: ``Authorization: Bearer <token>``, checked against stored digests."""

from datetime import timedelta

from django.http import HttpRequest
from ninja.security import HttpBearer

from notify.clock import system_clock
from notify.models import ServiceToken
from notify.models.service_token import digest

# "Last used" is for humans auditing tokens: minute precision spares a write per request.
LAST_USED_PRECISION = timedelta(minutes=1)

_LIVE_TOKEN = "SELECT * FROM notify_servicetoken WHERE digest = %s AND revoked_at IS NULL"


class ServiceTokenAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> ServiceToken | None:
        # Raw SQL: every request asks, and compiling the ORM query cost more CPU than the lookup.
        found = next(iter(ServiceToken.objects.raw(_LIVE_TOKEN, [digest(token)])), None)
        if found is None:
            return None
        now = system_clock.now()
        if found.last_used_at is None or found.last_used_at < now - LAST_USED_PRECISION:
            ServiceToken.objects.filter(pk=found.pk).update(last_used_at=now)
        return found
