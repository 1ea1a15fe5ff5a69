"""An in-process cache of policy versions for the worker's hot path.

Safe without invalidation: an event only ever points at a published version, a
published version's content is immutable (``PolicyVersion.save`` refuses it, and
lifecycle steps change only its status), and primary keys are never reused.
"""

from functools import lru_cache

from django.db import connection

from policies.models import PolicyVersion, Status


@lru_cache(maxsize=256)
def policy_version(pk: int) -> PolicyVersion:
    return PolicyVersion.objects.get(pk=pk)


def published_version(region: str) -> PolicyVersion | None:
    """Return the region's published version: which one is read afresh (publishing moves it),
    its content comes from the cache (it never changes). Every creation asks, hence raw SQL.

    The hot path's twin of ``PolicyVersion.objects.active_for``, which the admin and the data
    files use: it returns a fresh row, whereas the cached object's ``status`` may be stale."""
    with connection.cursor() as cursor:
        cursor.execute(_PUBLISHED, [region, Status.PUBLISHED.value])
        found = cursor.fetchone()
    return None if found is None else policy_version(found[0])


# At most one row: the policy_one_published_per_region constraint.
_PUBLISHED = "SELECT id FROM policies_policyversion WHERE region = %s AND status = %s"
