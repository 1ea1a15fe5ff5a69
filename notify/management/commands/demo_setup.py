"""Prepare the embedded demo: a console login, and how to scrape its metrics, printed once."""

import os
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-reset-delivery"


class Command(BaseCommand):
    help = "Create the demo login for the embedded default (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(
            username=DEMO_USERNAME, defaults={"is_staff": True, "is_superuser": True}
        )
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        port = os.environ.get("DEMO_PORT", "8000")
        self.stdout.write(f"Demo login: {DEMO_USERNAME} / {DEMO_PASSWORD} at http://127.0.0.1:{port}/")
        # The demo's generated token (var/dev-secrets.json): /metrics wants it here as in production.
        self.stdout.write(
            f"Metrics: curl -H 'Authorization: Bearer {settings.METRICS_TOKEN}' http://127.0.0.1:{port}/metrics"
        )
