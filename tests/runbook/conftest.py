from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.models import Group, Permission, User

from plumbing.clock import SystemClock
from tests.conftest import T0
from tests.runbook.pager_receiver import pager_receiver  # noqa: F401 (a fixture for the paging tests)


def _user(username: str, *groups: str, permissions: tuple[str, ...] = ()) -> User:
    user = User.objects.create_user(username, password="correct horse battery staple")
    user.groups.add(*Group.objects.filter(name__in=groups))
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="runbook", codename__in=permissions))
    return user


@pytest.fixture
def responder(db) -> User:
    return _user("rita", "responders")


@pytest.fixture
def viewer(db) -> User:
    return _user("victor", "viewers")


@pytest.fixture
def raw_viewer(db) -> User:
    return _user("rachel", "viewers", permissions=("view_raw_status",))


@pytest.fixture
def outsider(db) -> User:
    """A valid account without any console role."""
    return _user("olga")


@pytest.fixture
def console(client):
    """Return a test client logged in as the given user."""

    def login(user: User):
        client.force_login(user)
        return client

    return login


class TravellingClock(SystemClock):
    """The real clock, stopped: the console reads it, and so can the worker (``clock=``)."""

    def __init__(self, traveller) -> None:
        self._traveller = traveller

    def advance(self, seconds: float):
        self._traveller.shift(timedelta(seconds=seconds))
        return self.now()


@pytest.fixture
def clock():
    """Stop time at T0 for the console and the worker alike; it moves only with ``advance``."""
    with time_machine.travel(T0, tick=False) as traveller:
        yield TravellingClock(traveller)
