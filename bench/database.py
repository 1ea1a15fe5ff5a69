"""Create and migrate the benchmark database (never the test or demo one)."""

from datetime import UTC, datetime, timedelta

import psycopg
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from policies.models import PolicyVersion


def prepare() -> None:
    db = settings.DATABASES["default"]
    if connection.vendor != "postgresql":
        raise SystemExit("make bench needs PostgreSQL: set BENCH_DATABASE_URL to a postgres:// URL")
    admin = psycopg.connect(
        host=db["HOST"],
        port=db["PORT"],
        user=db["USER"],
        password=db.get("PASSWORD") or None,
        dbname="postgres",
        autocommit=True,
    )
    with admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [db["NAME"]]).fetchone()
        if not exists:
            admin.execute(f'CREATE DATABASE "{db["NAME"]}"')
    call_command("migrate", verbosity=0)


def reset_tables() -> PolicyVersion:
    """Empty the event tables and return the benchmark's own policy version (region BENCH)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE notify_transition, notify_observation, notify_claim, notify_vaultentry, notify_event CASCADE"
        )
    return bench_policy("BENCH")


def bench_policy(region: str) -> PolicyVersion:
    """Return the benchmark's policy for ``region`` (round numbers, as in the tests), made once."""
    policy, _ = PolicyVersion.objects.get_or_create(
        region=region,
        number=1,
        defaults={
            "published_at": datetime.now(UTC),
            "poll_interval": timedelta(seconds=10),
            "sms_budget": timedelta(seconds=60),
            "fallback_reserve": timedelta(seconds=120),
            "poll_cost": timedelta(seconds=2),
            "select_cost": timedelta(seconds=1),
            "email_submit_cost": timedelta(seconds=5),
            "record_cost": timedelta(seconds=1),
            "lease_ttl": timedelta(seconds=30),
            "email_attempt_limit": 3,
            "email_backoff": timedelta(seconds=10),
            "page_margin": timedelta(seconds=30),
            "vault_retention": timedelta(hours=1),
            "raw_payload_retention": timedelta(days=2),
            "observation_retention": timedelta(days=14),
        },
    )
    return policy


def seconds_scale_policy(region: str, **overrides: object) -> PolicyVersion:
    """A published policy on a seconds scale, so whole event lives fit in a chaos or load run."""
    seconds = {
        "poll_interval": 1, "sms_budget": 4, "fallback_reserve": 8, "poll_cost": 0.2, "select_cost": 0.1,
        "email_submit_cost": 1, "record_cost": 0.1, "lease_ttl": 3, "email_backoff": 0.5, "page_margin": 2,
        "vault_retention": 3600, "raw_payload_retention": 86400, "observation_retention": 86400,
    }  # fmt: skip
    fields: dict[str, object] = {name: timedelta(seconds=value) for name, value in seconds.items()}
    fields |= {
        "region": region, "number": 1, "status": "published", "published_at": datetime.now(UTC),
        "email_attempt_limit": 4, "allowed_sms_country_codes": [1], "sms_sender": "+15005550006",
        "email_from": "no-reset-reply@example.org", "sms_template": "Reset: {{ reset_url }}",
        "email_subject_template": "Your password reset link", "email_body_template": "Open {{ reset_url }}.",
    }  # fmt: skip
    PolicyVersion.objects.filter(region=region).delete()
    return PolicyVersion.objects.create(**(fields | overrides))
