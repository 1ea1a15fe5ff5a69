"""Lift a login throttle before its window ends: a responder locked out during an incident."""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runbook.console.logins import BY_ACCOUNT, BY_CLIENT, account_key


class Command(BaseCommand):
    help = "Forget the failed logins counted against an account name and/or a client address."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--account", help="the user name (any spelling: it is normalised as the throttle does)")
        parser.add_argument("--address", help="the client address, as the throttle sees it (docs/operations.md)")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["account"] and not options["address"]:
            raise CommandError("give --account, --address or both")
        if options["account"]:
            BY_ACCOUNT.clear(account_key(options["account"]))
        if options["address"]:
            BY_CLIENT.clear(options["address"])
        if settings.RATE_LIMIT_STORAGE.startswith("memory://"):
            # Each web process keeps its own counts then, out of this command's reach.
            self.stderr.write("No REDIS_CACHE_URL: the counts live in each web process; restart them to clear.")
            return
        self.stdout.write("Cleared: the next login attempt is checked as usual.")
