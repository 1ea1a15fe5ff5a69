from django.db import models

from notify.rules.vocabulary import Cause, State


class Transition(models.Model):
    """Append-only history: one row per workflow state change, numbered by version."""

    # No index of its own: the (event, version) unique constraint leads with event.
    event = models.ForeignKey("notify.Event", on_delete=models.CASCADE, related_name="transitions", db_index=False)
    from_state = models.CharField(max_length=20, choices=State.choices, blank=True)
    to_state = models.CharField(max_length=20, choices=State.choices)
    version = models.PositiveIntegerField(help_text="The event's version after this transition.")
    cause = models.CharField(max_length=12, choices=Cause.choices)
    actor = models.CharField(max_length=128)
    at = models.DateTimeField()
    observation = models.ForeignKey(
        "notify.Observation", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            # A second writer with the same version would mean the CAS was bypassed.
            models.UniqueConstraint(fields=["event", "version"], name="transition_event_version_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.event_id} v{self.version} {self.from_state}->{self.to_state}"
