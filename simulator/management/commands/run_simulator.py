"""Run the provider simulator: a Twilio-compatible Messages API and an SMTP sink."""

import asyncio
import json
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from simulator.account import Account
from simulator.profile import DEFAULT_PROFILE, ProfileError, load_profile
from simulator.server import Listening, serve


class Command(BaseCommand):
    help = (
        "Run the provider simulator until SIGINT or SIGTERM. Once both servers listen, print one "
        'JSON line with their ports, e.g. {"http_port": 8025, "smtp_port": 2525}.'
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--http-port", type=int, default=settings.SIMULATOR_HTTP_PORT, help="0: any free port")
        parser.add_argument("--smtp-port", type=int, default=settings.SIMULATOR_SMTP_PORT, help="0: any free port")
        parser.add_argument("--profile", type=Path, default=DEFAULT_PROFILE, help="TOML profile of regions and faults")
        parser.add_argument("--seed", type=int, default=None, help="seed of every random draw (default: random)")

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.TWILIO_ACCOUNT_SID or not settings.TWILIO_AUTH_TOKEN:
            raise CommandError("TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN must be set")
        try:
            profile = load_profile(options["profile"])
        except ProfileError as exc:
            raise CommandError(f"invalid profile: {exc}") from exc
        asyncio.run(
            serve(
                host=options["host"],
                http_port=options["http_port"],
                smtp_port=options["smtp_port"],
                account=Account(settings.TWILIO_ACCOUNT_SID, settings.TWILIO_AUTH_TOKEN),
                profile=profile,
                seed=options["seed"],
                on_ready=self._announce,
            )
        )

    def _announce(self, listening: Listening) -> None:
        # One line, flushed at once: the parent process blocks on reading it.
        self.stdout.write(json.dumps({"http_port": listening.http_port, "smtp_port": listening.smtp_port}))
        self.stdout.flush()
