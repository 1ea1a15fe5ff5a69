"""Retention: forget what each event's policy says to forget, keep the timings.

Destinations and reset links (the vault), raw provider statuses and old
observations go when the event's policy version says so. Events and their
transitions stay: states and times are de-identified and are what measurement
and replay need.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet

from notify.models import Observation, VaultEntry
from policies.models import PolicyVersion

# Delete in bounded batches, so a large backlog never holds long locks on hot tables.
BATCH = 5000


@dataclass(frozen=True)
class Purged:
    vault_entries: int
    raw_statuses: int
    observations: int


def purge(now: datetime) -> Purged:
    """Apply every policy version's retention periods as of ``now``.

    One pass per policy version (there are few), never per event. Vault retention
    counts from the reset's expiry: nothing is sent after it, so the link and the
    destinations have no further use.
    """
    vault = raw = observations = 0
    for policy in PolicyVersion.objects.filter(events__isnull=False).distinct():
        vault += _delete_in_batches(
            VaultEntry.objects.filter(event__policy=policy, event__expires_at__lte=now - policy.vault_retention)
        )
        raw += (
            Observation.objects.filter(event__policy=policy, recorded_at__lte=now - policy.raw_payload_retention)
            .exclude(raw_status="", raw_payload="")
            .update(raw_status="", raw_payload="")
        )
        observations += _delete_in_batches(
            Observation.objects.filter(event__policy=policy, recorded_at__lte=now - policy.observation_retention)
        )
    return Purged(vault, raw, observations)


def _delete_in_batches(rows: QuerySet[VaultEntry] | QuerySet[Observation]) -> int:
    deleted = 0
    while batch := list(rows.values_list("pk", flat=True)[:BATCH]):
        deleted += rows.model.objects.filter(pk__in=batch).delete()[0]
    return deleted
