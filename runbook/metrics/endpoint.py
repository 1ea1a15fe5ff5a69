"""``/metrics``: django-prometheus's exposition, served only for ``Authorization: Bearer <METRICS_TOKEN>``.

The metrics carry no personal data, but they do describe traffic, regions and failures,
and every scrape costs database queries: neither is for anyone who can reach the port.
Prometheus sends the token from its scrape config (``authorization:``, see
``deploy/prometheus/prometheus.yml``).
"""

import hmac
import logging
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage
from django.core.checks import Warning as CheckWarning
from django.http import HttpRequest, HttpResponse
from django_prometheus.exports import ExportToDjangoView

log = logging.getLogger("runbook.metrics")

# Long enough that guessing it over HTTP is hopeless (`secrets.token_urlsafe(32)` gives 43).
MINIMUM_TOKEN_LENGTH = 32


def metrics(request: HttpRequest) -> HttpResponse:
    expected: str | None = settings.METRICS_TOKEN
    if not expected:
        log.warning("metrics_refused", extra={"reason": "no_token_configured"})
        return HttpResponse("/metrics is closed: METRICS_TOKEN is not set on this server.\n", status=403)
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    # Constant time: how long the comparison takes tells nothing about how much matched.
    if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(), expected.encode()):
        log.info("metrics_refused", extra={"reason": "missing_token" if not presented else "wrong_token"})
        response = HttpResponse("a valid bearer token is required\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    answer: HttpResponse = ExportToDjangoView(request)
    return answer


def check_metrics_token(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Deploy check: a production server without a usable token serves no metrics."""
    token: str | None = settings.METRICS_TOKEN
    if not token:
        return [
            CheckWarning(
                "METRICS_TOKEN is not set: /metrics refuses every scrape (403).",
                hint="Set METRICS_TOKEN and give Prometheus the same value (docs/alerting.md).",
                id="runbook.W001",
            )
        ]
    if len(token) < MINIMUM_TOKEN_LENGTH:
        return [
            CheckWarning(
                f"METRICS_TOKEN is shorter than {MINIMUM_TOKEN_LENGTH} characters.",
                hint="Generate one: python -c 'import secrets; print(secrets.token_urlsafe(32))'",
                id="runbook.W002",
            )
        ]
    return []
