"""Celery's settings, read once from Django's into a plain mapping (see config/celery.py)."""

from django.conf import settings

# Every CELERY_* setting, with its prefix, as config_from_object(namespace="CELERY") expects.
CELERY = {name: getattr(settings, name) for name in dir(settings) if name.startswith("CELERY_")}
