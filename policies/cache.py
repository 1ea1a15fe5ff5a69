"""An in-process cache of policy versions for the worker's and the API's hot paths.

Safe without invalidation: an event only ever points at a published version, a
published version's content is immutable (``PolicyVersion.save`` refuses it, and
lifecycle steps change only its status), and primary keys are never reused.
"""

from functools import lru_cache
from typing import Any

from django.db import connection

from policies.models import PolicyVersion, Stage


@lru_cache(maxsize=256)
def policy_version(pk: int) -> PolicyVersion:
    return PolicyVersion.objects.get(pk=pk)


def published_version(region: str) -> PolicyVersion | None:
    """Return the region's published version: which one is read afresh (publishing moves it),
    its content comes from the cache (it never changes). Raw SQL: creations ask.

    The hot path's twin of ``PolicyVersion.objects.active_for``, which the admin and the data
    files use: it returns a fresh row, whereas the cached object's ``status`` may be stale."""
    with connection.cursor() as cursor:
        cursor.execute(_PUBLISHED, [region, Stage.PUBLISHED.value])
        found = cursor.fetchone()
    version = None if found is None else policy_version(found[0])
    _last_seen_published[region] = version
    return version


def presumed_published(region: str) -> PolicyVersion | None:
    """The version this process last saw published in ``region``, without asking the database
    (asked only where it has never looked). A presumption: whoever writes under it must check
    it in the same statement (``still_published``) and ask afresh where it no longer holds."""
    if region in _last_seen_published:
        return _last_seen_published[region]
    return published_version(region)


def still_published(version: PolicyVersion) -> tuple[str, list[Any]]:
    """An SQL condition, with its parameters, that holds while ``version`` is its region's published one."""
    return _STILL_PUBLISHED, [version.pk, Stage.PUBLISHED.value]


def forget() -> None:
    """Empty both caches (for tests, whose rolled-back transactions can reuse primary keys)."""
    policy_version.cache_clear()
    _last_seen_published.clear()


# Per process, by region; read and replaced whole, so threads need no lock.
_last_seen_published: dict[str, PolicyVersion | None] = {}

# At most one row: the policy_one_published_per_region constraint.
_PUBLISHED = "SELECT id FROM policies_policyversion WHERE region = %s AND status = %s"
_STILL_PUBLISHED = "EXISTS (SELECT 1 FROM policies_policyversion WHERE id = %s AND status = %s)"
