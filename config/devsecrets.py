"""Generated secrets for the embedded default only (demo and first run).

Production sets ``DJANGO_SECRET_KEY``, ``NOTIFY_VAULT_KEYS`` and
``NOTIFY_RECIPIENT_PEPPER`` explicitly; settings refuse to fall back to these
when ``DATABASE_URL`` points at a real database.
"""

import json
import secrets
from collections.abc import Callable
from pathlib import Path

from cryptography.fernet import Fernet


def load_or_create(path: Path) -> dict[str, str]:
    """Return the dev secrets stored at ``path``, generating them on first use."""
    stored: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
    wanted: dict[str, Callable[[], str]] = {
        "secret_key": lambda: secrets.token_urlsafe(50),
        "vault_key": lambda: Fernet.generate_key().decode(),
        "recipient_pepper": lambda: secrets.token_urlsafe(32),
        # Shared by the console (which verifies callback signatures) and the simulator (which signs them).
        "twilio_auth_token": lambda: secrets.token_hex(16),
        # What a local Prometheus (or curl) presents to scrape /metrics.
        "metrics_token": lambda: secrets.token_urlsafe(32),
    }
    missing = {name: make() for name, make in wanted.items() if name not in stored}
    if missing:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(stored | missing))
        path.chmod(0o600)
    return stored | missing
