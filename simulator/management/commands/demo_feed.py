"""Feed the demo a steady stream of reset requests, as services would.

Destinations are random fictional numbers and addresses; what happens to each
message (delivered, failed, slow, never confirmed, an unknown outcome) is the
provider simulator's per-region profile, so the console shows a realistic mix.
"""

import random
import signal
import time
import uuid
from datetime import timedelta
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from notify.intake import EventRefused, ResetRequest
from notify.writes.create import create_event
from plumbing.clock import current_clock
from simulator.control import SimulatorControl
from simulator.fictional import fictional_phone

# Region -> its fictional subscribers' countries, each with the locale and time zone they give.
COUNTRIES = {
    "US": [("US", "en-US", "America/New_York"), ("US", "es-US", "America/Los_Angeles"), ("US", "", "")],
    "EU": [
        ("DE", "de-DE", "Europe/Berlin"),
        ("AT", "de-AT", "Europe/Vienna"),
        ("FR", "fr-FR", "Europe/Paris"),
        ("NL", "nl-NL", "Europe/Amsterdam"),  # no Dutch set: the English default
        ("ES", "es-ES", "Europe/Madrid"),
        ("IT", "it-IT", "Europe/Rome"),
        ("PL", "pl-PL", "Europe/Warsaw"),
        ("GR", "el-GR", "Europe/Athens"),
    ],
}


class Command(BaseCommand):
    help = "Create demo reset requests at a steady rate until stopped (Ctrl-C)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--rate", type=float, default=0.5, help="events per second (default 0.5)")
        parser.add_argument("--ttl", type=int, default=600, help="reset link lifetime in seconds (default 600)")
        parser.add_argument("--seed", type=int, default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["rate"] <= 0:
            raise SystemExit("demo_feed: --rate must be positive")
        rng = random.Random(options["seed"])
        simulator = f"http://127.0.0.1:{settings.SIMULATOR_HTTP_PORT}"
        SimulatorControl(simulator).wait_until_up(timeout=60)

        def stop(signum: int, frame: FrameType | None) -> None:
            # Stop at once, even mid-sleep; an event being created is one transaction
            # and is either committed or rolled back whole.
            raise SystemExit(0)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        created = 0
        while True:
            region = rng.choice(list(COUNTRIES))
            country, locale, time_zone = rng.choice(COUNTRIES[region])
            request = ResetRequest(
                service="demo-feed",
                client_key=str(uuid.UUID(int=rng.getrandbits(128))),
                region=region,
                purpose="password_reset",
                phone=fictional_phone(rng, country),
                email=f"subscriber.{rng.randrange(10**8)}@example.org",
                reset_url=f"https://accounts.example.org/reset/{uuid.uuid4().hex}",
                ttl=timedelta(seconds=options["ttl"]),
                consent=True,
                locale=locale,
                time_zone=time_zone,
            )
            try:
                event = create_event(request, now=current_clock().now(), sends_wake_up=True).event
            except EventRefused as refused:
                self.stderr.write(f"demo_feed: refused ({refused.reason}): {refused.message}")
            else:
                created += 1
                self.stdout.write(f"demo_feed: created {event.id} ({region}), {created} so far")
            time.sleep(rng.expovariate(options["rate"]))
