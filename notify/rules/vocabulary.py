"""The vocabulary of the workflow: states, channels, observations, causes, actions."""

from django.db import models


class State(models.TextChoices):
    SMS_REQUESTED = "sms_requested"
    SMS_PENDING = "sms_pending"
    SMS_DELIVERED = "sms_delivered"
    SMS_FAILED = "sms_failed"
    EMAIL_CLAIMED = "email_claimed"
    EMAIL_ACCEPTED = "email_accepted"
    EMAIL_FAILED = "email_failed"
    EXPIRED = "expired"


class Channel(models.TextChoices):
    SMS = "sms"
    EMAIL = "email"


class ClaimState(models.TextChoices):
    CLAIMED = "claimed"
    SUBMITTING = "submitting"
    ACCEPTED = "accepted"
    DELIVERED = "delivered"
    FAILED = "failed"


class Normalized(models.TextChoices):
    """The internal status vocabulary adapters map every raw provider status to."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    PENDING = "pending"
    DELIVERED = "delivered"
    TERMINAL_FAILURE = "terminal_failure"
    TRANSIENT_ERROR = "transient_error"
    UNKNOWN_OUTCOME = "unknown_outcome"
    # The worker sending an email was lost mid-send (a takeover found the claim submitting):
    # whether the relay took that message cannot be known, so the resend may be a second copy.
    POSSIBLE_DUPLICATE = "possible_duplicate"
    # The provider refused our account or credentials: nothing was sent, and nothing will be
    # until an operator fixes the configuration (paged at once, once per region).
    CONFIGURATION_ERROR = "configuration_error"
    # Ours, not a provider's: the fallback email was not sent because the link had too little
    # life left for it to be of use. A failure of the channel, kept apart from the provider's.
    NO_USEFUL_LIFE = "no_useful_life"
    NOTE = "note"


class Source(models.TextChoices):
    POLL = "poll"
    CALLBACK = "callback"
    SUBMIT = "submit"
    RECOVERY = "recovery"
    OPERATOR = "operator"


class Effect(models.TextChoices):
    """What a piece of evidence (an observation, a receipt) did to its event: one vocabulary for
    the logs, the metrics' labels and the console (README, "Effect names")."""

    APPLIED = "applied", "applied: moved the event"
    RECORDED = "recorded", "recorded: kept as evidence, the event stays where it is"
    LATE = "late", "late: arrived after the event had moved past it"
    CONFLICT = "conflict", "conflict: its writer had lost the event; kept as evidence only"


class Cause(models.TextChoices):
    CREATED = "created"
    OBSERVATION = "observation"
    DEADLINE = "deadline"
    OPERATOR = "operator"


class NextAction(models.TextChoices):
    SUBMIT_SMS = "submit_sms", "submit the SMS"
    RECOVER_SMS = "recover_sms", "recover the SMS submit (look up before resubmitting)"
    POLL_SMS = "poll_sms", "poll the SMS receipt"
    CLAIM_EMAIL = "claim_email", "claim the email fallback"
    SUBMIT_EMAIL = "submit_email", "submit the email (same key on retry)"
    EXPIRE = "expire", "expire the event"
    NONE = "none", "none"


class RequestPurpose(models.TextChoices):
    PASSWORD_RESET = "password_reset"
