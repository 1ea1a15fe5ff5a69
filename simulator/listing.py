"""Filter and page the message list the way Twilio's list endpoint does (newest first).

``DateSent`` filters compare days when given ``YYYY-MM-DD`` and seconds when given
``YYYY-MM-DDTHH:MM:SSZ`` (the ``twilio`` client sends the latter for a datetime). A message not
sent yet has no date_sent, so any DateSent filter leaves it out, as Twilio's does.
"""

import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import urlencode

from simulator.messages import SmsMessage

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
_FILTERS = ("To", "From", "DateSent", "DateSent<", "DateSent>")
_DATE_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "DateSent": operator.eq,
    "DateSent<": operator.le,
    "DateSent>": operator.ge,
}
_TOKEN_PREFIX = "PA"

Predicate = Callable[[SmsMessage, datetime], bool]


class ListQueryError(ValueError):
    """A list query the endpoint refuses (400)."""


@dataclass(frozen=True)
class ListPage:
    """One page of the filtered, newest-first list."""

    records: list[SmsMessage]
    page: int
    page_size: int
    start: int
    more: bool


def select(newest_first: Iterable[SmsMessage], query: Mapping[str, str], now: datetime) -> ListPage:
    """Return the page of messages ``query`` asks for, as of ``now``."""
    predicates = _predicates(query)
    page_size = _integer(query, "PageSize", DEFAULT_PAGE_SIZE, minimum=1, maximum=MAX_PAGE_SIZE)
    page = _integer(query, "Page", 0, minimum=0, maximum=None)
    matching = [message for message in newest_first if all(p(message, now) for p in predicates)]
    start = _start(matching, query.get("PageToken"), page * page_size)
    records = matching[start : start + page_size]
    return ListPage(records, page, page_size, start, more=start + page_size < len(matching))


def page_body(result: ListPage, resources: list[dict[str, Any]], path: str, query: Mapping[str, str]) -> dict[str, Any]:
    """Return the v2010 list payload: the records under ``messages`` and the paging keys."""
    filters = {key: query[key] for key in _FILTERS if key in query}

    def uri(page: int, token: str | None = None) -> str:
        paging = {"PageSize": str(result.page_size), "Page": str(page)}
        if token:
            paging["PageToken"] = token
        return f"{path}?{urlencode(filters | paging)}"

    # The next page resumes after this page's last sid, so messages created meanwhile shift nothing.
    next_token = f"{_TOKEN_PREFIX}{result.records[-1].sid}" if result.more else None
    return {
        "messages": resources,
        "page": result.page,
        "page_size": result.page_size,
        "start": result.start,
        "end": result.start + max(len(result.records) - 1, 0),
        "uri": uri(result.page, query.get("PageToken")),
        "first_page_uri": uri(0),
        "next_page_uri": uri(result.page + 1, next_token) if next_token else None,
        "previous_page_uri": uri(result.page - 1) if result.page > 0 else None,
    }


def _predicates(query: Mapping[str, str]) -> list[Predicate]:
    predicates: list[Predicate] = []
    to, from_ = query.get("To"), query.get("From")
    if to is not None:
        predicates.append(lambda message, _now: message.to == to)
    if from_ is not None:
        predicates.append(lambda message, _now: message.from_ == from_)
    for key, compare in _DATE_COMPARISONS.items():
        if key in query:
            predicates.append(_date_sent_predicate(key, query[key], compare))
    return predicates


def _date_sent_predicate(key: str, raw: str, compare: Callable[[Any, Any], bool]) -> Predicate:
    try:
        bound: date | datetime = datetime.strptime(raw, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        try:
            bound = date.fromisoformat(raw)
        except ValueError:
            raise ListQueryError(f"{key} must be YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ") from None

    def matches(message: SmsMessage, now: datetime) -> bool:
        sent = message.date_sent(now)
        if sent is None:
            return False
        # A datetime is also a date: test for datetime to pick the granularity.
        return compare(sent.replace(microsecond=0) if isinstance(bound, datetime) else sent.date(), bound)

    return matches


def _integer(query: Mapping[str, str], key: str, default: int, *, minimum: int, maximum: int | None) -> int:
    try:
        value = int(query.get(key, default))
    except ValueError:
        raise ListQueryError(f"{key} must be an integer") from None
    if value < minimum or (maximum is not None and value > maximum):
        raise ListQueryError(f"{key} must be between {minimum} and {maximum or 'any'}")
    return value


def _start(matching: list[SmsMessage], token: str | None, offset: int) -> int:
    if token is None:
        return offset
    sids = [message.sid for message in matching]
    after = token.removeprefix(_TOKEN_PREFIX)
    if not token.startswith(_TOKEN_PREFIX) or after not in sids:
        raise ListQueryError("PageToken is not valid")
    return sids.index(after) + 1
