"""Generated secrets for the embedded default only (demo and first run).

Production sets ``DJANGO_SECRET_KEY``, ``NOTIFY_VAULT_KEYS`` and
``NOTIFY_RECIPIENT_PEPPER`` explicitly; settings refuse to fall back to these
when ``DATABASE_URL`` points at a real database.
"""

import json
import secrets
from pathlib import Path

from cryptography.fernet import Fernet


def load_or_create(path: Path) -> dict[str, str]:
    """Return the dev secrets stored at ``path``, generating them on first use."""
    if path.exists():
        stored: dict[str, str] = json.loads(path.read_text())
        return stored
    path.parent.mkdir(parents=True, exist_ok=True)
    generated = {
        "secret_key": secrets.token_urlsafe(50),
        "vault_key": Fernet.generate_key().decode(),
        "recipient_pepper": secrets.token_urlsafe(32),
    }
    path.write_text(json.dumps(generated))
    path.chmod(0o600)
    return generated
