from django.conf import settings
from django.db import models


class AuditAction(models.TextChoices):
    RELEASE_LEASE = "release_lease", "released an expired lease"
    CLAIM_FALLBACK = "claim_fallback", "claimed the email fallback"
    FOLLOW_UP = "follow_up", "marked for follow-up"
    VIEW_RAW_STATUS = "view_raw_status", "viewed raw provider statuses"


class AuditEntry(models.Model):
    """Who did what to which event from the console, including what they only looked at.

    Kept apart from the event's own history: a refused action changes no event, yet who
    tried it, and why it was refused, is what a post-incident review asks first.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    action = models.CharField(max_length=20, choices=AuditAction.choices)
    # Not a foreign key: the audit trail outlives any clean-up of events.
    event_id = models.CharField(max_length=30)
    at = models.DateTimeField()
    applied = models.BooleanField(help_text="False when the action was refused (someone else won the race).")
    # Why a refused action was refused, whose lease was released, or the follow-up note.
    detail = models.CharField(max_length=500, blank=True)

    class Meta:
        verbose_name_plural = "audit entries"
        permissions = [
            ("view_console", "Can open the on-call console"),
            ("act_on_events", "Can take runbook actions on events"),
            ("view_raw_status", "Can see raw provider statuses"),
        ]
        indexes = [
            # Consumers: the event page's list of console actions taken on this event, and
            # the open-events list's follow-up badges for the events on its page.
            models.Index(fields=["event_id", "at"], name="audit_event_time_idx"),
            # Consumer: the console's follow-up list, newest first.
            models.Index(
                fields=["-at"], name="audit_follow_up_idx", condition=models.Q(action="follow_up", applied=True)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.user_id} {self.action} {self.event_id}"


class PageMode(models.TextChoices):
    OBSERVE = "observe", "observed only (would have paged)"
    PAGE = "page", "paged"


class PageReason(models.TextChoices):
    AT_RISK = "at_risk", "its action budget fell within the page margin"
    STEP_FAILING = "step_failing", "its worker step raises, again and again"


class Surge(models.Model):
    """One incident for a region while more of its events are at risk than its policy's ``surge_threshold``.

    While it is open its region's new at-risk pages are covered by it (``Page.surge``) and send
    no trigger of their own; its trigger says how many, in which state most, and which are
    the most urgent, and is sent again with the count (same dedup key: updated in place, at
    most once per evaluation interval). It resolves once the region has been at or under the
    threshold for the policy's ``surge_quiet_period``; the events still at risk then page on
    their own. At most one open per region (the partial unique key is the dedup: two
    evaluators racing insert one row). Like a page, an outbox entry in ``page`` mode.
    """

    region = models.CharField(max_length=8)
    mode = models.CharField(max_length=8, choices=PageMode.choices)
    opened_at = models.DateTimeField()
    # As the last evaluation counted it: how many, where most of them are, and the most urgent few
    # (opaque event ids, most urgent first), for the responder and the pager's summary.
    at_risk = models.PositiveIntegerField()
    most_at_risk = models.PositiveIntegerField(help_text="The largest count any evaluation made while it was open.")
    dominant_state = models.CharField(max_length=20)
    dominant_next_action = models.CharField(max_length=20)
    most_urgent = models.JSONField(default=list)
    counted_at = models.DateTimeField()
    # Since when the region has been at or under the threshold (NULL while it is over).
    quiet_since = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    # The pager's side, as a page's: when the trigger (and each count update) and the resolve landed.
    trigger_sent_at = models.DateTimeField(null=True, blank=True)
    trigger_uncertain = models.BooleanField(default=False)
    # The count the pager last got (0: none yet); an update is owed while it differs from ``at_risk``.
    sent_at_risk = models.PositiveIntegerField(default=0)
    resolve_sent_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    failures = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["region"], condition=models.Q(resolved_at__isnull=True), name="surge_one_open_per_region"
            ),
        ]
        indexes = [
            # Consumer: the pager's outbox.
            models.Index(
                fields=["next_attempt_at"],
                name="surge_outbox_idx",
                condition=models.Q(next_attempt_at__isnull=False),
            ),
            # Consumer: the would-have-paged review, by day.
            models.Index(fields=["opened_at"], name="surge_opened_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.mode} surge {self.region} {self.opened_at:%Y-%m-%d %H:%M}"

    @property
    def dedup_key(self) -> str:
        return f"surge-{self.region}-{self.pk}"


class Page(models.Model):
    """An event whose action budget fell within its policy's page margin while a step remained,
    or whose worker step kept raising (``PageReason``).

    At most one per event (the one-to-one key is the dedup: two evaluators racing insert
    one row). In ``observe`` mode it is only a record for threshold review; in ``page`` mode
    it is also an outbox entry: the trigger, and the resolve once the event is terminal,
    are delivered to the pager and retried until they land.
    """

    event = models.OneToOneField("notify.Event", on_delete=models.CASCADE, related_name="page")
    # The region's surge that covered it when it opened: no trigger of its own while that is open.
    surge = models.ForeignKey(Surge, null=True, blank=True, on_delete=models.SET_NULL, related_name="pages")
    region = models.CharField(max_length=8)
    mode = models.CharField(max_length=8, choices=PageMode.choices)
    # Why it opened: the budget, or a step that keeps raising (a bad row, not a slow provider),
    # whichever came first; one page per event either way.
    reason = models.CharField(
        max_length=16, choices=PageReason.choices, default=PageReason.AT_RISK, db_default="at_risk"
    )
    opened_at = models.DateTimeField()
    # The event as it was when it went at risk, for review: what was left, and for what.
    state = models.CharField(max_length=20)
    next_action = models.CharField(max_length=20)
    budget_seconds = models.FloatField(help_text="Remaining action budget when it went at risk.")
    resolved_at = models.DateTimeField(null=True, blank=True, help_text="When the event reached a terminal state.")
    trigger_sent_at = models.DateTimeField(null=True, blank=True)
    # A trigger attempt got no answer (timeout, connection lost): the pager may have it.
    trigger_uncertain = models.BooleanField(default=False)
    resolve_sent_at = models.DateTimeField(null=True, blank=True)
    # When the next delivery is due; NULL when nothing is left to send (and always in observe mode).
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # Every delivery claim bumps this; it fences the claim's outcome (see pager._record).
    attempts = models.PositiveIntegerField(default=0)
    # Failures in a row of each message, each with its own backoff: a resolve owed after a
    # trigger that failed five times starts again from the shortest wait.
    trigger_failures = models.PositiveIntegerField(default=0)
    resolve_failures = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=200, blank=True)

    class Meta:
        indexes = [
            # Consumer: the delivery outbox, which sends what is due.
            models.Index(
                fields=["next_attempt_at"],
                name="page_outbox_idx",
                condition=models.Q(next_attempt_at__isnull=False),
            ),
            # Consumer: the evaluator's resolve step, over pages whose event may have ended.
            models.Index(fields=["event"], name="page_unresolved_idx", condition=models.Q(resolved_at__isnull=True)),
            # Consumer: the would-have-paged review, by day.
            models.Index(fields=["opened_at"], name="page_opened_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.mode} {self.event_id}"


class PagerQuota(models.Model):
    """How many messages one pager integration key may still take now, shared by every deliverer.

    PagerDuty limits each integration key (about 120 events a minute) and answers 429 with
    ``Retry-After`` past it. A token bucket per key, refilled at ``PAGER_EVENTS_PER_MINUTE``,
    keeps all deliverer processes together under the limit; ``paused_until`` is the silence
    a 429 asked for. Keyed by a digest of the routing key, never the key itself.
    """

    key_digest = models.CharField(max_length=16, primary_key=True)
    tokens = models.FloatField()
    refilled_at = models.DateTimeField()
    paused_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.key_digest}: {self.tokens:.1f}"


class Evidence(models.Model):
    """What a replay of a region's recent history said about a policy version, beside the published one."""

    compared_with = models.CharField(max_length=32, blank=True, help_text="The published version, e.g. US v3.")
    window_start = models.DateTimeField(null=True, blank=True)
    window_end = models.DateTimeField(null=True, blank=True)
    records = models.PositiveIntegerField(default=0)
    # Too little history in the window: a seeded generated set was replayed instead, and said so.
    generated = models.BooleanField(default=False)
    # {"draft": {metric: value, ...}, "published": {...}}: runbook.projections.FIGURES.
    figures = models.JSONField(default=dict)
    broken_targets = models.JSONField(default=list)

    class Meta:
        abstract = True


class Projection(Evidence):
    """A policy version's projected effect, computed in the background (``runbook.evidence.projections``)
    whenever a draft is saved.

    One row per version: ``requested_hash`` is the content last asked about, ``content_hash`` the
    content the figures describe; the two differ while a newer content is being computed, and a
    projection whose ``content_hash`` is not the version's content is stale (the draft changed since).
    """

    policy = models.OneToOneField("policies.PolicyVersion", on_delete=models.CASCADE, related_name="projection")
    requested_hash = models.CharField(max_length=64)
    requested_at = models.DateTimeField()
    content_hash = models.CharField(max_length=64, blank=True)
    computed_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True)
    tradeoff_png = models.BinaryField(blank=True, default=b"")
    failure = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"projection of {self.policy}"


class PolicyApproval(Evidence):
    """The evidence an approver saw when approving a version: its projection, copied, and why."""

    policy = models.OneToOneField("policies.PolicyVersion", on_delete=models.CASCADE, related_name="approval_record")
    approver = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    approved_at = models.DateTimeField()
    content_hash = models.CharField(max_length=64)
    reason = models.TextField(blank=True, help_text="Why a draft that breaks the region's targets was approved.")

    def __str__(self) -> str:
        return f"approval of {self.policy}"


class Recommendation(models.Model):
    """A value ``replay --recommend`` found for one field of a region's policy, with its figures."""

    region = models.CharField(max_length=8)
    field = models.CharField(max_length=32)
    value = models.CharField(max_length=32, help_text="Seconds for durations.")
    based_on = models.ForeignKey("policies.PolicyVersion", on_delete=models.CASCADE, related_name="+")
    targets = models.JSONField(default=list)
    figures = models.JSONField(default=dict)
    records = models.PositiveIntegerField(default=0)
    source = models.CharField(max_length=200, blank=True, help_text="The timing file replayed (its name only).")
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["region", "-created_at"], name="recommendation_latest_idx")]

    def __str__(self) -> str:
        return f"{self.region} {self.field}={self.value}"
