import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from notify import invariants
from plumbing.clock import current_clock


class Command(BaseCommand):
    help = (
        "Check the delivery invariants over the recorded history (and, with --provider-counts, what the "
        "provider accepted per message); print the violations as JSON and exit 1 if there is any."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--since-hours", type=float, help="only events created in the last N hours")
        parser.add_argument(
            "--grace", type=float, help="seconds an event may stay open past its expiry (default: 2 sweeps + 10 s)"
        )
        parser.add_argument(
            "--provider-counts",
            type=Path,
            help='a JSON file of what the provider accepted per message, {"sms": {event id: n}, "email": '
            "{Message-ID: n}} (the provider simulator serves it at /simulator/counts)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        now = current_clock().now()
        since = now - timedelta(hours=options["since_hours"]) if options["since_hours"] else None
        grace = timedelta(seconds=options["grace"] or 2 * settings.NOTIFY_SWEEP_INTERVAL + 10)
        provider = None
        if options["provider_counts"]:
            provider = _provider_counts(options["provider_counts"])
        found = invariants.check(now=now, grace=grace, since=since, provider=provider)
        self.stdout.write(json.dumps([violation.__dict__ for violation in found], indent=2))
        if invariants.failures(found):
            raise SystemExit(1)


def _provider_counts(path: Path) -> invariants.ProviderCounts:
    try:
        counts = json.loads(path.read_text())
        return invariants.ProviderCounts(sms=dict(counts["sms"]), email=dict(counts["email"]))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise CommandError(f"--provider-counts {path}: {error}") from None
