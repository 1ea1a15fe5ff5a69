"""Staying under the pager's rate limit, and quiet while it asks us to be.

One token bucket per routing key (``PagerQuota``), shared by every deliverer process
through the database: a delivery run takes the tokens it will spend before it claims any
page, so all of them together send at most ``PAGER_EVENTS_PER_MINUTE`` (below PagerDuty's
limit of about 120 a minute per integration key) plus a small burst. A 429 pauses the key
for its ``Retry-After``; pages of other keys go on.
"""

import hashlib
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from runbook.models import PagerQuota

# Messages a key may take at once after a quiet spell. With the steady rate that is at most
# BURST + PAGER_EVENTS_PER_MINUTE in any minute: 20 + 100 stays within PagerDuty's 120.
BURST = 20


def digest(routing_key: str) -> str:
    """The quota row's key: the routing key is a credential and is not stored."""
    return hashlib.sha256(routing_key.encode()).hexdigest()[:16]


def take(routing_key: str, wanted: int, now: datetime) -> int:
    """Spend up to ``wanted`` tokens of the key's bucket; return how many were granted."""
    if wanted <= 0:
        return 0
    with transaction.atomic():
        # The row lock serializes deliverers of one key between read and write, so two
        # runs never spend the same tokens; it is held for two statements, no call.
        quota, _ = PagerQuota.objects.select_for_update().get_or_create(
            key_digest=digest(routing_key), defaults={"tokens": BURST, "refilled_at": now}
        )
        if _paused(quota, now):
            return 0
        tokens = _refilled(quota, now)
        granted = min(wanted, int(tokens))
        quota.tokens = tokens - granted
        quota.refilled_at = max(now, quota.refilled_at)
        quota.paused_until = None
        quota.save()
    return granted


def may_send(routing_key: str, now: datetime) -> bool:
    """Whether the key has a token to spend now and no pause: read without a lock, so only a hint
    for which pages to take (``take`` decides what goes)."""
    quota = PagerQuota.objects.filter(key_digest=digest(routing_key)).first()
    return quota is None or (not _paused(quota, now) and _refilled(quota, now) >= 1)


def _paused(quota: PagerQuota, now: datetime) -> bool:
    return quota.paused_until is not None and now < quota.paused_until


def _refilled(quota: PagerQuota, now: datetime) -> float:
    """The bucket's tokens at ``now``: refilled at PAGER_EVENTS_PER_MINUTE since it was last, up to BURST."""
    # A deliverer whose clock runs behind the last one's refills nothing, rather than taking
    # tokens back.
    elapsed = max((now - quota.refilled_at).total_seconds(), 0.0)
    return min(float(BURST), quota.tokens + elapsed * settings.PAGER_EVENTS_PER_MINUTE / 60)


def pause(routing_key: str, until: datetime) -> None:
    """Send nothing more on this key before ``until`` (the pager answered 429); never shorten a pause."""
    PagerQuota.objects.filter(
        Q(paused_until__isnull=True) | Q(paused_until__lt=until), key_digest=digest(routing_key)
    ).update(paused_until=until, tokens=0)
