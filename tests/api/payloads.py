import threading
import uuid

from django.db import connections

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


def statuses_from_a_thread(client, payload, *, wait: float = 30) -> list[int]:
    """POST ``payload`` from a thread of its own, waiting for it at most ``wait`` seconds.

    Its own thread: it opens its own broker producer and database connection, as a new web
    thread would, and a request that hangs is left behind: the answer is then ``[]``.
    """
    statuses: list[int] = []

    def send() -> None:
        try:
            statuses.append(post(client, payload).status_code)
        finally:
            connections.close_all()  # this thread's own database connection

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    sender.join(timeout=wait)
    return statuses
