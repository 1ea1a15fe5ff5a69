import json
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from notify import invariants
from notify.clock import current_clock
from notify.simulator.control import SimulatorControl


class Command(BaseCommand):
    help = (
        "Check the delivery invariants over the recorded history (and, with --simulator, the provider "
        "simulator's counts); print the violations as JSON and exit 1 if there is any."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--since-hours", type=float, help="only events created in the last N hours")
        parser.add_argument(
            "--grace", type=float, help="seconds an event may stay open past its expiry (default: 2 sweeps + 10 s)"
        )
        parser.add_argument("--simulator", help="the simulator's base URL, to check its per-message counts")

    def handle(self, *args: Any, **options: Any) -> None:
        now = current_clock().now()
        since = now - timedelta(hours=options["since_hours"]) if options["since_hours"] else None
        grace = timedelta(seconds=options["grace"] or 2 * settings.NOTIFY_SWEEP_INTERVAL + 10)
        provider = None
        if options["simulator"]:
            try:
                counts = SimulatorControl(options["simulator"]).counts()
            except OSError as error:
                raise CommandError(f"--simulator {options['simulator']}: {error}") from None
            provider = invariants.ProviderCounts(sms=counts["sms"], email=counts["email"])
        found = invariants.check(now=now, grace=grace, since=since, provider=provider)
        self.stdout.write(json.dumps([violation.__dict__ for violation in found], indent=2))
        if invariants.failures(found):
            raise SystemExit(1)
