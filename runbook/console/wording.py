"""What an observation means, in the responder's words: the console's one vocabulary for outcomes.

Every page and the timeline ask ``of`` rather than print ``normalized``, so a kind is
worded once. Most kinds are read from the normalized status (per channel where the
channels differ); a few of *our own* status words (written by the worker or an adapter,
never a provider's) mean more than their normalized status and are worded apart. Only
the words listed here are matched, so a provider's raw status never reaches a page:
those stay behind the audited raw-status view.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from notify.models import Observation
from notify.rules.vocabulary import Channel, Normalized


@dataclass(frozen=True)
class Worded:
    # A stable name for styling and tests: the normalized status, or our own word.
    kind: str
    # A few words: the "Last observation" box, the tables, the timeline.
    label: str
    # What it means for the subscriber and what happens next; empty when the label says it all.
    meaning: str = ""


class Key(NamedTuple):
    normalized: Normalized
    channel: Channel | None = None  # None: either channel
    word: str = ""  # one of our own status words; "": any


_UNRESOLVED_SMS = (
    "The SMS stays unresolved and is not resent unless a lookup proves it absent; "
    "if it is still unresolved at the fallback deadline D, the email fallback (if any) goes instead."
)

# Keyed by (normalized, channel, word) as stored, so a row's own values look it up.
WORDING: Mapping[tuple[str, str | None, str], Worded] = {
    Key(Normalized.ACCEPTED): Worded("accepted", "accepted"),
    Key(Normalized.REJECTED): Worded("rejected", "rejected"),
    Key(Normalized.PENDING): Worded("pending", "pending"),
    Key(Normalized.DELIVERED): Worded("delivered", "delivered"),
    Key(Normalized.TERMINAL_FAILURE): Worded("terminal_failure", "terminal failure"),
    Key(Normalized.TRANSIENT_ERROR): Worded("transient_error", "transient error"),
    Key(Normalized.UNKNOWN_OUTCOME): Worded("unknown_outcome", "unknown outcome"),
    Key(Normalized.UNKNOWN_OUTCOME, Channel.SMS): Worded(
        "unknown_outcome",
        "unknown outcome",
        "The provider may have the SMS, so only a lookup can settle it. " + _UNRESOLVED_SMS,
    ),
    Key(Normalized.UNKNOWN_OUTCOME, Channel.EMAIL): Worded(
        "unknown_outcome",
        "unknown outcome",
        "The email was handed over but the relay's reply was lost, and SMTP has no lookup: recorded before "
        "any resend, it is resent under the same Message-ID as the policy allows, so a second copy is possible.",
    ),
    Key(Normalized.POSSIBLE_DUPLICATE): Worded(
        "possible_duplicate",
        "possible duplicate",
        "The worker sending this email was lost mid-send; the resend may be a second copy "
        "(same Message-ID, so mail clients collapse the two).",
    ),
    Key(Normalized.CONFIGURATION_ERROR): Worded(
        "configuration_error",
        "provider refuses our credentials",
        "The provider refused our account or credentials: nothing was sent, and nothing will be "
        "on this channel until an operator fixes the configuration.",
    ),
    Key(Normalized.NOTE): Worded("note", "note"),
    Key(Normalized.NO_USEFUL_LIFE): Worded(
        "no_useful_life",
        "fallback without useful life (not sent)",
        "The link had too little life left for an email to be of use, so none was sent: the event ends email_failed.",
    ),
    Key(Normalized.UNKNOWN_OUTCOME, Channel.SMS, "not_listed_yet"): Worded(
        "not_listed_yet",
        "unresolved: not listed yet",
        "The provider does not list the SMS yet, which proves nothing before its processing horizon "
        "has passed (see the note for when). " + _UNRESOLVED_SMS,
    ),
    Key(Normalized.UNKNOWN_OUTCOME, Channel.SMS, "lookup_ambiguous"): Worded(
        "lookup_ambiguous",
        "unresolved: lookup ambiguous",
        "Redacted messages at the provider could be this SMS, so the lookup cannot tell. " + _UNRESOLVED_SMS,
    ),
    Key(Normalized.TRANSIENT_ERROR, Channel.SMS, "not_found"): Worded(
        "not_found",
        "proven absent",
        "Past the provider's processing horizon the lookup still does not list the SMS: it was never created, "
        "so it is submitted again with the same key.",
    ),
    Key(Normalized.UNKNOWN_OUTCOME, Channel.SMS, "lookup_redacted"): Worded(
        "lookup_redacted",
        "unresolved: absence unprovable",
        "The provider redacts phone numbers, so no lookup can prove the SMS absent: it is not resent; "
        "if still unresolved at the fallback deadline D, the email fallback (if any) goes instead.",
    ),
}


def of(observation: Observation) -> Worded:
    """Return what ``observation`` means, from the most specific wording that applies."""
    normalized, channel, word = observation.normalized, observation.channel, observation.raw_status
    for key in ((normalized, channel, word), (normalized, channel, ""), (normalized, None, "")):
        if key in WORDING:
            return WORDING[key]
    # A kind the console does not know yet (a newer worker): its own word, never a blank.
    return Worded(normalized, normalized.replace("_", " "))
