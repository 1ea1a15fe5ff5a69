"""Every template set's SMS at its longest, checked against the policy's segment limit.

The longest a set's SMS can be: the longest reset link the policy accepts (a placeholder of
``reset_url_max_length`` characters) and the longest expiry text any subscriber reaching the
set can get: every CLDR locale that falls to it and speaks its language (the rest get its
own language's), every hour of the day, a zone east and west of GMT with minutes.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from functools import cache
from typing import Protocol

from babel import UnknownLocaleError
from django.template import TemplateSyntaxError

from policies import locales, rendering
from policies.segments import Encoded, describe, encode

# Hours and minutes that make every digit count show: 00:59 ... 23:59 (and 12 h clocks' 1:59, 10:59).
_HOURS = [datetime(2026, 1, 15, hour, 59, tzinfo=UTC) for hour in range(24)]
# Offsets with minutes on both sides of GMT: the longest a localized GMT format gets.
_ZONES = (timezone(timedelta(hours=5, minutes=45)), timezone(-timedelta(hours=3, minutes=30)))
_LINK_START = "https://reset.example/"
# How many of the characters that forced UCS-2 a table names (an error names them all).
_SUMMARIZED = 8
# What a version not yet valid can raise when measured: a template that does not compile, a
# locale that is not one. Validation names each; the measuring only stands back.
UNMEASURABLE = (TemplateSyntaxError, ValueError, UnknownLocaleError)


class SegmentSettings(rendering.MessageSettings, Protocol):
    sms_max_segments: int | None  # None: not set yet (``fitting_limit`` gives the default)
    reset_url_max_length: int


@dataclass(frozen=True)
class SetCheck:
    """One template set's SMS at its longest: what it costs, and what it reads like."""

    template_set: rendering.TemplateSet
    encoded: Encoded
    preview: str
    limit: int | None

    @property
    def within_limit(self) -> bool:
        return self.limit is None or self.encoded.segments <= self.limit

    @property
    def forced_summary(self) -> str:
        """The characters that forced UCS-2, the first few named, for a table ("—" where none)."""
        forcing = self.encoded.forcing_ucs2
        return (describe(forcing[:_SUMMARIZED]) + (" …" if len(forcing) > _SUMMARIZED else "")) or "—"

    @property
    def problem(self) -> str:
        forced = f", forced by {describe(self.encoded.forcing_ucs2)}" if self.encoded.forcing_ucs2 else ""
        return (
            f"locale {self.template_set.label}: the SMS is {self.encoded.encoding}{forced}, "
            f"{self.encoded.characters} characters in {self.encoded.segments} segments at its longest, "
            f"over the limit of {self.limit} (sms_max_segments)"
        )


def placeholder_link(length: int) -> str:
    """A stand-in reset link of ``length`` characters (GSM-7's basic alphabet, as links are)."""
    return (_LINK_START + "x" * length)[: max(length, 0)]


def check(policy: SegmentSettings) -> list[SetCheck]:
    """Each set's SMS rendered at its longest, default set first."""
    link = placeholder_link(policy.reset_url_max_length)
    reached = _reached_by(policy)
    checks = []
    for template_set in rendering.template_sets(policy):
        worst: tuple[Encoded, str] | None = None
        for time, zone in _expiry_candidates(template_set, reached.get(template_set.key, [])):
            text = rendering.render_sms(template_set.sms, link, _HOURS[-1], time, zone)
            encoded = encode(text)
            if worst is None or (encoded.segments, encoded.units) > (worst[0].segments, worst[0].units):
                worst = (encoded, text)
        assert worst is not None  # the set's own language is always a candidate
        checks.append(SetCheck(template_set, worst[0], worst[1], policy.sms_max_segments))
    return checks


def fitting_limit(policy: SegmentSettings) -> int:
    """The limit a policy gets by default: 1 where every set's SMS fits one segment at its longest, else 2.

    A set that does not render yet counts as not fitting; validation then names its problem."""
    try:
        fits = all(result.encoded.segments == 1 for result in check(policy))
    except UNMEASURABLE:
        fits = False
    return 1 if fits else 2


def _reached_by(policy: SegmentSettings) -> dict[str, list[str]]:
    """The CLDR locales whose lookup chain stops at each set."""
    keys = {template_set.key for template_set in rendering.template_sets(policy)}
    reached: dict[str, list[str]] = {}
    for tag in locales.known_tags():
        reached.setdefault(rendering.set_key_for(keys, tag), []).append(tag)
    return reached


def _expiry_candidates(template_set: rendering.TemplateSet, subscribers: list[str]) -> set[tuple[str, str]]:
    tags = {rendering.formatting_tag(tag, template_set.written_in) for tag in subscribers}
    tags.add(template_set.written_in)  # a subscriber with no locale, or another language's
    return {pair for tag in tags for pair in _expiry_texts(tag)}


@cache
def _expiry_texts(tag: str) -> frozenset[tuple[str, str]]:
    """Every (time, zone) text pair Babel writes in ``tag`` over a day and the widest zones."""
    return frozenset(rendering.local_expiry_texts(hour.replace(tzinfo=zone), tag) for hour in _HOURS for zone in _ZONES)
