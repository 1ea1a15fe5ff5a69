"""Create a service token for the internal API and print it, once."""

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from notify.models import ServiceToken
from plumbing.clock import current_clock


class Command(BaseCommand):
    help = "Create an API token for a service. The token is printed once and stored only as a digest."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("service", help="the calling service's name, e.g. accounts")
        parser.add_argument("--label", default="", help="what this token is for (a host, a deploy)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            row, token = ServiceToken.issue(options["service"], now=current_clock().now(), label=options["label"])
        except ValidationError as invalid:
            problems = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in invalid.message_dict.items())
            raise CommandError(f"cannot create a token: {problems}") from None
        self.stderr.write(f"Token {row.prefix}… for service {row.service!r}. Store it now: it is not shown again.")
        self.stdout.write(token)
