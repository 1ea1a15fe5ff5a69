"""Schema-driven fuzzing: whatever a client sends, no 5xx and no answer outside the served schema."""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from config.wsgi import application

schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", application)

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


@pytest.fixture
def authorized(token, policy):
    return {"Authorization": f"Bearer {token}"}


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
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_makes_the_api_fail_or_answer_outside_its_schema(case, authorized):
    case.call_and_validate(headers=authorized, checks=CHECKS)
