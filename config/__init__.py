# First, before anything imports the decision code: its compiled copies if they are current,
# its sources otherwise (config.native).
from config import native

native.choose()

from config.celery import app as celery_app  # noqa: E402 (after the choice above, on purpose)

__all__ = ["celery_app"]
