"""The in-request breakdown charges each stage of the real path, and leaves the path as it found it."""

import pytest
from django.core.handlers.base import BaseHandler
from ninja.operation import Operation

from bench import api_stages
from notify.api import events as api_events
from notify.writes import wake_ups


@pytest.fixture
def few_requests(monkeypatch, settings, transactional_db, policy):
    monkeypatch.setattr(api_stages, "REQUESTS", 4)
    monkeypatch.setattr(api_stages, "ROUNDS", 1)
    settings.ALLOWED_HOSTS = ["127.0.0.1"]


def test_each_kind_of_request_is_charged_the_stages_it_went_through(few_requests):
    stages = api_stages.run().per_request

    assert all(stages[kind][api_stages.WHOLE] > 0 for kind in ("creation", "whoami", "callback"))
    assert stages["creation"]["create_event"] > 0
    assert stages["creation"]["  of which the wake-up published"] > 0  # after the commit: it really committed
    assert stages["whoami"]["create_event"] == stages["whoami"]["  of which the wake-up published"] == 0
    assert stages["callback"]["transition (observation, CAS, claim)"] > 0
    assert stages["creation"]["create_event"] < stages["creation"][api_stages.WHOLE]


def test_the_wrapped_functions_are_put_back(few_requests):
    def wrapped() -> tuple[object, ...]:
        return BaseHandler.get_response, Operation._run_checks, vars(api_events)["create_event"], wake_ups.publish

    originals = wrapped()

    api_stages.run()

    assert wrapped() == originals


def test_the_table_names_every_kind_and_what_is_left_over(few_requests):
    table = api_stages.table(api_stages.run())

    header = table.splitlines()[0]
    assert header == "| inside a request (Django's handler, this process) | creation | whoami | callback |"
    assert "| the rest (Django's handler, middleware, ninja, the view) |" in table
