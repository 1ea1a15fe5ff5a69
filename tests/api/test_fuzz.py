"""Schema-driven fuzzing: whatever a client sends, the API answers as its served schema says.

Every check and every phase schemathesis has (examples, coverage, fuzzing, and the stateful phase
that follows the creation's link to its read), judged as schemathesis.toml and
tests/api/schema_hooks.py say: a schema-valid request is refused only for a documented rule.
"""

from pathlib import Path

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings

from config.env import Rate
from config.wsgi import application
from notify.intake import Refusal
from notify.models import Event
from plumbing.ratelimit import limiter_for
from tests.api import schema_hooks  # registers the check and the hook

CONFIG = schemathesis.Config.from_path(Path(__file__).resolve().parents[2] / "schemathesis.toml")
schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", application, config=CONFIG)


# The service token of the test running now. Given through schemathesis's auth provider, the
# credentials are known to be real: it then also probes every operation with none and wrong ones.
current_token: dict[str, str] = {}


@schema.auth(refresh_interval=None)  # asked on every call: each test issues its own token
class ServiceTokenAuth:
    def get(self, case, ctx):
        return current_token.get("token", "")

    def set(self, case, data, ctx):
        if case.headers is None:
            case.headers = {}
        case.headers["Authorization"] = f"Bearer {data}"


@pytest.fixture
def authorized(token, policy):
    current_token["token"] = token
    yield
    current_token.clear()


@pytest.fixture(autouse=True)
def auth_probes_are_not_throttled(settings):
    # The coverage and stateful phases probe every operation with no token and a wrong one, as
    # many times as they like; after API_AUTH_FAILURES_PER_CLIENT (30/min) the address would get
    # 429 instead of 401. That throttle has tests of its own (test_auth_throttle.py).
    settings.API_AUTH_FAILURES_PER_CLIENT = Rate(1_000_000, 60)
    settings.API_RATE_LIMIT = Rate(1_000_000, 60)  # likewise the per-service limit (test_create.py tests it)


@pytest.fixture(autouse=True)
def keep_the_test_connection():
    # Schemathesis calls the WSGI app directly, and Django closes a connection that is inside
    # a transaction at the end of each request: the test's own transaction. Django's test
    # client disconnects the same handler for the same reason.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_makes_the_api_answer_outside_its_schema(case, authorized):
    case.call_and_validate()


def test_a_stateful_client_follows_the_creation_to_its_read(authorized):
    answered: list[tuple[str, str, int]] = []

    class Workflow(schema.as_state_machine()):  # type: ignore[misc]
        def setup(self):
            # Each example starts from the same state, so replaying one gives the same answers
            # (a client_key seen in an earlier example would turn a 201 into a 200).
            Event.objects.all().delete()
            limiter_for.cache_clear()  # the counts in memory

        def after_call(self, response, case):
            answered.append((case.operation.method.upper(), case.operation.path, response.status_code))

    # Derandomized: whether 40 random walks take a creation's link to a 200 is chance (one make
    # test in many walked none), and this asserts that the link can be followed, not the luck.
    checked = settings(
        max_examples=40, stateful_step_count=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
    )
    Workflow.run(settings=checked)

    # The link was followed: a created event was read back, not only 404s.
    assert ("GET", "/api/v1/events/{event_id}", 200) in answered


def test_the_documented_refusals_are_the_api_s_own():
    # Every refusal the API gives for a rule the schema cannot state, but the 409 a changed replay gets.
    assert {refusal.value for refusal in Refusal} - {Refusal.IDEMPOTENCY_CONFLICT} == schema_hooks.DOCUMENTED_REFUSALS


def test_a_host_the_service_does_not_serve_is_answered_as_the_schema_says(authorized):
    # The case make test's fuzzing once found: Django refused the Host before any view, in HTML,
    # with a status the schema did not list.
    case = schema["/api/v1/whoami"]["GET"].Case(headers={"Zpvp": "purge-retained-data", "Host": "k Key"})

    case.call_and_validate()
