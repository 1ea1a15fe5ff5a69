import hashlib
import secrets
from datetime import datetime

from django.core.validators import RegexValidator
from django.db import models

TOKEN_PREFIX = "rdt_"

service_name = RegexValidator(r"^[a-z0-9][a-z0-9._-]{0,63}$", "lower-case letters, digits, '.', '_' and '-'")


def digest(token: str) -> str:
    """Return what is stored for a token. Tokens are 256 random bits: a fast hash is enough."""
    return hashlib.sha256(token.encode()).hexdigest()


class ServiceToken(models.Model):
    """A bearer token of one internal service. Only its digest is stored; the token is shown once."""

    service = models.CharField(max_length=64, validators=[service_name], help_text="The calling service's name.")
    label = models.CharField(max_length=100, blank=True, help_text="What this token is for (a host, a deploy).")
    prefix = models.CharField(max_length=16, editable=False, help_text="The token's first characters.")
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    def __str__(self) -> str:
        return f"{self.service} {self.prefix}…"

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    @classmethod
    def issue(cls, service: str, *, now: datetime, label: str = "") -> tuple["ServiceToken", str]:
        """Create a token for ``service``; return the row and the token, which is never stored."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        row = cls(service=service, label=label, prefix=token[:12], digest=digest(token), created_at=now)
        row.full_clean()
        row.save()
        return row, token
