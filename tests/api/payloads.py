import uuid

from tests.factories import CANARY_EMAIL, CANARY_PHONE, CANARY_RESET_URL


def body(**overrides):
    """A valid creation request; override any field, or drop it with ``field=None``."""
    fields = {
        "client_key": f"reset-{uuid.uuid4()}",
        "purpose": "password_reset",
        "region": "US",
        "phone": CANARY_PHONE,
        "email": CANARY_EMAIL,
        "reset_url": CANARY_RESET_URL,
        "ttl_seconds": 600,
    }
    fields.update(overrides)
    return {key: value for key, value in fields.items() if value is not None}


def post(client, payload, **headers):
    return client.post("/api/v1/events", payload, content_type="application/json", headers=headers)
