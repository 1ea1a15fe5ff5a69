"""A policy's reset messages for one subscriber: the template set for their locale, the expiry in
their time zone and language.

A policy version holds a default template set (written in its ``default_locale``) and any
number of sets keyed by locale. A subscriber's locale picks a set by its lookup chain
(de-AT, then de, then the default). The expiry is formatted by Babel: in the subscriber's
own locale where it speaks the set's language (de-AT's conventions for a German set), else
in the set's language (an English message does not carry a Chinese time), and in the
subscriber's time zone, UTC when they gave none.

This module reads a version through the attributes it names (``MessageSettings``); it never
imports the model, which validates itself with it.
"""

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from babel import dates
from django.template import Context, Template

from policies import locales

# The key of the default set in ``TemplateSet.key`` and in the roll-up's locale label.
DEFAULT = ""
# Where a subscriber gave no time zone, the expiry is shown in UTC (and says so).
FALLBACK_TIME_ZONE = "UTC"
# The three templates of a locale's set, as the policy's ``locale_templates`` names them.
SET_FIELDS = ("sms", "email_subject", "email_body")
# Babel (CLDR 42 and later) puts a no-break space, or a narrow one, between a time and its
# AM/PM. Neither is in GSM-7: one of them would turn the whole SMS into UCS-2 and cut each
# segment from 160 characters to 70. An ordinary space reads the same on a phone.
_SMS_SPACES = str.maketrans({"\u00a0": " ", "\u202f": " "})


class MessageSettings(Protocol):
    """What rendering reads of a policy version."""

    sms_template: str
    email_subject_template: str
    email_body_template: str
    default_locale: str
    locale_templates: Any  # a JSON field: {locale: {"sms": ..., "email_subject": ..., "email_body": ...}}


@dataclass(frozen=True)
class TemplateSet:
    key: str  # the locale it is kept under, or DEFAULT
    written_in: str  # the language tag of its text: its key, or the policy's default_locale
    sms: str
    email_subject: str
    email_body: str

    @property
    def texts(self) -> dict[str, str]:
        """The three templates by their names in ``SET_FIELDS``."""
        return dict(zip(SET_FIELDS, (self.sms, self.email_subject, self.email_body), strict=True))

    @property
    def label(self) -> str:
        """How the console and the admin name it: "de", or "en (default)"."""
        return self.key or f"{self.written_in} (default)"


@dataclass(frozen=True)
class Audience:
    """Who a message is for, as far as its wording goes: nothing personal."""

    locale: str = ""  # a canonical BCP 47 tag, or "" (the default set)
    time_zone: str = ""  # an IANA name, or "" (UTC)


@dataclass(frozen=True)
class Email:
    subject: str
    body: str
    language: str  # for Content-Language


def template_sets(policy: MessageSettings) -> list[TemplateSet]:
    """The default set first, then each locale's, in key order."""
    default = TemplateSet(
        DEFAULT, policy.default_locale, policy.sms_template, policy.email_subject_template, policy.email_body_template
    )
    localized = [
        TemplateSet(key, key, *(str(texts.get(name, "")) for name in SET_FIELDS))
        for key, texts in sorted((policy.locale_templates or {}).items())
        if isinstance(texts, dict)
    ]
    return [default, *localized]


def template_set_for(policy: MessageSettings, locale: str) -> TemplateSet:
    """The set a subscriber in ``locale`` gets: the first of its lookup chain the policy has."""
    sets = {template_set.key: template_set for template_set in template_sets(policy)}
    return sets[set_key_for(sets.keys(), locale)]


def set_key_for(keys: Collection[str], locale: str) -> str:
    """The first of ``locale``'s lookup chain among ``keys``, else DEFAULT."""
    return next((candidate for candidate in locales.chain(locale) if candidate in keys), DEFAULT) if locale else DEFAULT


def formatting_tag(audience_locale: str, written_in: str) -> str:
    """The locale the expiry is formatted in: the subscriber's where it writes the set's language
    in the set's script (de-AT for a German set), else the set's own (en-Shaw gets en digits)."""
    if audience_locale and locales.writing(audience_locale) == locales.writing(written_in):
        return audience_locale
    return written_in


def expiry_texts(expires_at: datetime, time_zone: str, tag: str) -> tuple[str, str]:
    """The expiry's time and zone as Babel writes them in ``tag``: ("22:59", "GMT+01:00")."""
    return local_expiry_texts(expires_at.astimezone(ZoneInfo(time_zone or FALLBACK_TIME_ZONE)), tag)


def local_expiry_texts(local: datetime, tag: str) -> tuple[str, str]:
    """``local``'s time, short, and its offset in the localized GMT format: both fixed-width
    per locale, which is what lets the segment check know the longest (a zone's name would not)."""
    locale = locales.formatting_locale(tag)
    return dates.format_time(local, "short", locale=locale), dates.get_timezone_gmt(local, "long", locale=locale)


def sms_text(policy: MessageSettings, audience: Audience, reset_url: str, expires_at: datetime) -> str:
    template_set, time, zone = _worded(policy, audience, expires_at)
    return render_sms(template_set.sms, reset_url, expires_at, time, zone)


def _worded(policy: MessageSettings, audience: Audience, expires_at: datetime) -> tuple[TemplateSet, str, str]:
    """The audience's template set, and the expiry's time and zone as it is written for them."""
    template_set = template_set_for(policy, audience.locale)
    time, zone = expiry_texts(expires_at, audience.time_zone, formatting_tag(audience.locale, template_set.written_in))
    return template_set, time, zone


def render_sms(template: str, reset_url: str, expires_at: datetime, time: str, zone: str) -> str:
    """Render an SMS template; the expiry's spaces made GSM-7's (see ``_SMS_SPACES``)."""
    return render(template, reset_url, expires_at, time.translate(_SMS_SPACES), zone.translate(_SMS_SPACES))


def email(policy: MessageSettings, audience: Audience, reset_url: str, expires_at: datetime) -> Email:
    template_set, time, zone = _worded(policy, audience, expires_at)
    return Email(
        subject=render(template_set.email_subject, reset_url, expires_at, time, zone).strip(),
        body=render(template_set.email_body, reset_url, expires_at, time, zone),
        language=template_set.written_in,
    )


def render(template: str, reset_url: str, expires_at: datetime, time: str, zone: str) -> str:
    """Render one template. ``expires_at`` (UTC) stays in the context for templates written before
    the localized ``expires_time`` and ``expires_zone``."""
    context = {"reset_url": reset_url, "expires_at": expires_at, "expires_time": time, "expires_zone": zone}
    return _compiled(template).render(Context(context, autoescape=False))


@lru_cache(maxsize=256)
def _compiled(template: str) -> Template:
    # A version's templates never change once published: compile each text once per process.
    return Template(template)
