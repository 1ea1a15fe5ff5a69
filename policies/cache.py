"""An in-process cache of policy versions for the worker's hot path.

Safe because an event only ever points at a published version, and a published
version is immutable (a change is a new version). The cache is still cleared on
any save in this process, so a draft edited in tests or the shell is never stale.
"""

from functools import lru_cache
from typing import Any

from policies.models import PolicyVersion


@lru_cache(maxsize=256)
def policy_version(pk: int) -> PolicyVersion:
    return PolicyVersion.objects.get(pk=pk)


def clear(**_: Any) -> None:
    policy_version.cache_clear()
