"""Subscriber locales (BCP 47 tags) and time zones (IANA names): validation and lookup chains.

``langcodes`` reads a tag as RFC 5646 writes it: well-formed and registered subtags,
deprecated codes replaced (iw -> he), variants in order. CLDR (Babel) then decides whether
it names a language, script and region it knows, and formats in it. A tag is valid when
CLDR knows each subtag, even if it has no data for the combination (de-US is a German
speaker in the US: formatted as de, never refused). The lookup chain is RFC 4647's
"Lookup": drop subtags from the right until a match (de-AT, then de).
"""

import zoneinfo
from functools import cache

import langcodes
from babel import Locale, localedata

# RFC 5646 advises supporting tags of at least 35 characters.
MAX_TAG_LENGTH = 35
MAX_TIME_ZONE_LENGTH = 64
# Names in the host's zone database that are not IANA time zones: "localtime" is whatever
# the host is set to, "Factory" a placeholder. A subscriber's zone must mean the same everywhere.
_NOT_ZONES = frozenset({"localtime", "Factory", "posixrules"})


class InvalidLocale(ValueError):
    """Not a language tag this service can read; the message says which part is wrong."""


@cache
def _cldr_codes() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    names = Locale("en")
    return frozenset(names.languages), frozenset(names.scripts), frozenset(names.territories)


def canonical(tag: str) -> str:
    """Return ``tag`` as RFC 5646 writes it (``de-AT``, ``zh-Hant-TW``, ``he-IL`` for ``iw-IL``).

    Extensions and private use (``-u-ca-japanese``, ``-x-...``) are dropped: RFC 4647's
    lookup ignores them, and they say nothing about which words to send.
    """
    if not tag or len(tag) > MAX_TAG_LENGTH or not tag.isascii() or not langcodes.tag_is_valid(tag):
        raise InvalidLocale("not a BCP 47 tag (language[-Script][-REGION][-variant]), such as de-AT")
    parsed = langcodes.Language.get(langcodes.standardize_tag(tag))
    languages, scripts, territories = _cldr_codes()
    # "und" (undetermined) and "ZZ" (unknown region) are placeholders, not a subscriber's locale.
    if parsed.language is None or parsed.language not in languages or parsed.language == "und":
        raise InvalidLocale("unknown language subtag: use an ISO 639 code such as de or el")
    if parsed.script is not None and parsed.script not in scripts:
        raise InvalidLocale("unknown script subtag: use an ISO 15924 code such as Latn or Hant")
    if parsed.territory is not None and (parsed.territory not in territories or parsed.territory == "ZZ"):
        raise InvalidLocale("unknown region subtag: use an ISO 3166 code such as AT, or a UN M.49 code such as 419")
    subtags = (parsed.language, parsed.script, parsed.territory, *(parsed.variants or ()))
    return "-".join(subtag for subtag in subtags if subtag)


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


def formatting_locale(tag: str) -> Locale:
    """Babel's locale for formatting in ``tag``: the first in its chain CLDR has data for.

    Cached per CLDR locale, not per tag: callers' tags are unbounded, CLDR's locales are not.
    """
    identifier = data_identifier(tag)
    return _parsed(identifier if identifier is not None else language(tag))


def data_identifier(tag: str) -> str | None:
    """The identifier of the CLDR locale data ``tag`` is formatted with (de_AT, de), or None if it has none."""
    identifiers = _identifiers()
    keys = (candidate.replace("-", "_").lower() for candidate in chain(tag))
    return next((identifiers[key] for key in keys if key in identifiers), None)


@cache
def _identifiers() -> dict[str, str]:
    # Lower-cased: a canonical tag writes variants in lower case (ca-ES-valencia), CLDR in upper.
    return {identifier.lower(): identifier for identifier in localedata.locale_identifiers()}


@cache
def _parsed(identifier: str) -> Locale:
    return Locale.parse(identifier)


@cache
def known_tags() -> tuple[str, ...]:
    """Every locale CLDR has data for, as canonical tags: the subscribers a template check must cover."""
    tags = set()
    for identifier in localedata.locale_identifiers():
        try:
            tags.add(canonical(identifier.replace("_", "-")))
        except InvalidLocale:
            continue  # CLDR's own oddities (en_US_POSIX): no caller can send them
    return tuple(sorted(tags))


@cache
def _time_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones()) - _NOT_ZONES


def valid_time_zone(name: str) -> bool:
    """Whether ``name`` is an IANA time zone (Europe/Vienna, UTC), as the bundled database has it."""
    return len(name) <= MAX_TIME_ZONE_LENGTH and name in _time_zones()
