"""Encrypted storage of the only personal data we hold: destinations and the reset link.

Nothing outside the transport adapters reads these values. ``Destinations``
never shows them in its ``repr``, so a stray log line or traceback cannot leak them.
"""

import hashlib
import hmac
import json
from dataclasses import dataclass, field
from functools import cache

from cryptography.fernet import Fernet, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class Destinations:
    phone: str = field(repr=False)
    email: str = field(repr=False)
    reset_url: str = field(repr=False)


@cache
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except ValueError:
        raise ImproperlyConfigured(
            "NOTIFY_VAULT_KEYS must be a comma-separated list of Fernet keys (32 url-safe base64 bytes)"
        ) from None


def _cipher() -> MultiFernet:
    return _fernet(tuple(settings.NOTIFY_VAULT_KEYS))


def seal(destinations: Destinations) -> bytes:
    plain = json.dumps({"phone": destinations.phone, "email": destinations.email, "reset_url": destinations.reset_url})
    return _cipher().encrypt(plain.encode())


def unseal(ciphertext: bytes | memoryview) -> Destinations:
    return Destinations(**json.loads(_cipher().decrypt(bytes(ciphertext))))


def keyed_hash(value: str) -> str:
    """Return an HMAC of ``value`` under the recipient pepper: correlatable, not reversible."""
    return hmac.new(settings.NOTIFY_RECIPIENT_PEPPER.encode(), value.encode(), hashlib.sha256).hexdigest()
