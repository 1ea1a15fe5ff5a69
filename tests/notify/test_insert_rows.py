"""A creation's rows write what Django itself would INSERT, though most values skip the field's conversion."""

import warnings
from datetime import UTC, datetime

import pytest
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql

from notify.models import Claim, Event, Transition, VaultEntry
from notify.rules.vocabulary import State
from notify.writes import sql as write_sql

MODELS = [Event, Claim, VaultEntry, Transition]

# Every kind of value a field could be handed, the traps included: an int where text goes, a
# bool where an int goes (Python's bool is an int), a naive datetime, text where a time goes.
any_value = st.one_of(
    st.none(),
    st.text(max_size=4),
    st.sampled_from(list(State)),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.datetimes(timezones=st.just(UTC)),
    st.datetimes(),
    st.sampled_from(["2026-12-06 10:00:00+00:00", "not a time", "1", b"bytes"]),
)


def as_django_writes(instance):
    """The row Django's own conversion gives: every value through its field's get_db_prep_save."""
    return {
        field.column: field.get_db_prep_save(getattr(instance, field.attname), connection)
        for field in instance._meta.concrete_fields
        if not (field.primary_key and getattr(instance, field.attname) is None)
    }


def comparable(value):
    # What the driver writes into the statement (Django's cursors bind client side): Django hands an
    # integer column Int4(3) where a plain 3 is written the same. By type too, for what is not:
    # True == 1 in Python, but one is written true and the other 1.
    return sql.Literal(value).as_string(None)


def outcome(convert, instance):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a naive datetime, made aware by its field
        try:
            row = convert(instance)
            return [comparable(write_sql.adapted(value)) for value in row.values()], list(row)
        except Exception as error:  # the same refusal, whatever it is, is the expected outcome
            return type(error)


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model.__name__)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_a_row_is_what_django_would_insert_whatever_the_values(model, data):
    instance = model()
    for field in model._meta.concrete_fields:
        setattr(instance, field.attname, data.draw(any_value, label=field.attname))

    assert outcome(write_sql._model_row, instance) == outcome(as_django_writes, instance)


def test_the_usual_values_are_written_as_they_are(db):
    # What the shortcut is for: a new event's text, flags, counts and aware times are not converted.
    now = datetime.now(UTC)
    event = Event(id="evt_1", state=State.SMS_REQUESTED, version=1, fallback_available=True, created_at=now)

    row = write_sql._model_row(event)

    assert row["id"] == "evt_1"
    assert row["state"] is State.SMS_REQUESTED
    assert row["fallback_available"] is True
    assert row["created_at"] is now
