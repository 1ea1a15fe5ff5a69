"""An in-process cache of policy versions for the worker's hot path.

Safe without invalidation: an event only ever points at a published version, a
published version's content is immutable (``PolicyVersion.save`` refuses it, and
lifecycle steps change only its status), and primary keys are never reused.
"""

from functools import lru_cache

from policies.models import PolicyVersion


@lru_cache(maxsize=256)
def policy_version(pk: int) -> PolicyVersion:
    return PolicyVersion.objects.get(pk=pk)
