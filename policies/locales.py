"""Subscriber locales (BCP 47 tags) and time zones (IANA names): validation and lookup chains.

Babel (CLDR) decides what a language, script and region are; the lookup chain is RFC 4647's
"Lookup": drop subtags from the right until a match (de-AT -> de). A tag is valid when
its subtags are well-formed and CLDR knows each one, even if CLDR has no data for the
combination (de-US is a German speaker in the US: formatted as de, never refused).
"""

import zoneinfo
from functools import cache

from babel import Locale, localedata
from babel.core import parse_locale

# RFC 5646 advises supporting tags of at least 35 characters.
MAX_TAG_LENGTH = 35
MAX_TIME_ZONE_LENGTH = 64


class InvalidLocale(ValueError):
    """Not a language tag this service can read; the message says which part is wrong."""


@cache
def _cldr_codes() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    names = Locale("en")
    return frozenset(names.languages), frozenset(names.scripts), frozenset(names.territories)


def canonical(tag: str) -> str:
    """Return ``tag`` in canonical case (``de-AT``, ``zh-Hant-TW``), or raise InvalidLocale."""
    if not tag or len(tag) > MAX_TAG_LENGTH:
        raise InvalidLocale(f"a locale is a BCP 47 tag of at most {MAX_TAG_LENGTH} characters, such as de-AT")
    parts: tuple[str | None, ...]
    try:
        parts = parse_locale(tag, sep="-")
    except ValueError:
        parts = ()
    if len(parts) != 4:  # unparsable, or a POSIX @modifier: not BCP 47
        raise InvalidLocale("not a BCP 47 tag (language[-Script][-REGION][-variant]), such as de-AT")
    language, territory, script, variant = parts
    languages, scripts, territories = _cldr_codes()
    # "und" (undetermined) and "ZZ" (unknown region) are placeholders, not a subscriber's locale.
    if not language or language not in languages or language == "und":
        raise InvalidLocale("unknown language subtag: use an ISO 639 code such as de or el")
    if script is not None and script not in scripts:
        raise InvalidLocale("unknown script subtag: use an ISO 15924 code such as Latn or Hant")
    if territory is not None and (territory not in territories or territory == "ZZ"):
        raise InvalidLocale("unknown region subtag: use an ISO 3166 code such as AT, or a UN M.49 code such as 419")
    return "-".join(part for part in (language, script, territory, variant) if part)


def chain(tag: str) -> list[str]:
    """Return the lookup chain of a canonical tag, most specific first: zh-Hant-TW, zh-Hant, zh."""
    parts = tag.split("-")
    return ["-".join(parts[:end]) for end in range(len(parts), 0, -1)]


def language(tag: str) -> str:
    return tag.split("-", 1)[0]


def writing(tag: str) -> tuple[str, str | None]:
    """The language and script subtag of a canonical tag (the script is None where left to the language)."""
    parts = tag.split("-")
    return parts[0], next((part for part in parts[1:2] if len(part) == 4 and part.isalpha()), None)


@cache
def formatting_locale(tag: str) -> Locale:
    """Babel's locale for formatting in ``tag``: the first in its chain CLDR has data for."""
    for candidate in chain(tag):
        identifier = candidate.replace("-", "_")
        if localedata.exists(identifier):
            return Locale.parse(identifier)
    return Locale.parse(language(tag))


@cache
def known_tags() -> tuple[str, ...]:
    """Every locale CLDR has data for, as canonical tags: the subscribers a template check must cover."""
    return tuple(sorted(identifier.replace("_", "-") for identifier in localedata.locale_identifiers()))


@cache
def _time_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def valid_time_zone(name: str) -> bool:
    """Whether ``name`` is an IANA time zone this host's database has (Europe/Vienna, UTC)."""
    return len(name) <= MAX_TIME_ZONE_LENGTH and name in _time_zones()
