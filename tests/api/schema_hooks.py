"""What schemathesis needs to judge this API beyond its schema: the rules JSON Schema cannot express.

Imported by tests/api/test_fuzz.py; against a deployment, give it to the CLI with
``SCHEMATHESIS_HOOKS=tests.api.schema_hooks`` (docs/api.md).
"""

import zlib
from typing import Any

import schemathesis

# A request the schema allows may still be refused (422) by a rule JSON Schema cannot state: a
# number valid in its country's numbering plan, an address or link that really is one, a region
# with a published policy, the policy's own destinations, consent, lifetime and longest link, a
# locale and time zone CLDR and the IANA database know. These, and only
# these, are documented in the operation's description. Anything else (invalid_request,
# unknown_field) on a schema-valid request means the schema promises more than the API accepts.
# Written out, not imported: the CLI loads this module without Django (test_fuzz.py checks the list
# against notify.intake.Refusal).
DOCUMENTED_REFUSALS = frozenset(
    {
        "invalid_phone", "invalid_email", "invalid_reset_url", "invalid_expiry", "unusable_expiry",
        "lifetime_too_long", "unknown_purpose", "unknown_region", "destination_not_allowed", "consent_required",
        "invalid_locale", "invalid_time_zone", "reset_url_too_long",
    }
)  # fmt: skip

# What a real caller sends in the fields whose rules the schema cannot state, so that half of the
# schema-valid creations get past those rules, are created, and let the stateful phase follow the
# creation's link to its read. The other half keep whatever was generated.
REALISTIC = {
    "region": "US",
    "phone": "+14155550123",
    "email": "subscriber@example.org",
    "reset_url": "https://accounts.example.org/reset/fuzz",
}


@schemathesis.check
def refused_only_for_a_documented_rule(ctx: Any, response: Any, case: Any) -> bool | None:
    """A schema-valid request is refused only for a documented rule the schema cannot express."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code != 422:
        return None
    code = response.json().get("error")
    if code not in DOCUMENTED_REFUSALS:
        raise AssertionError(f"a schema-valid request was refused as {code!r}: the schema allows what the API refuses")
    return None


@schemathesis.hook
def map_case(ctx: Any, case: Any) -> Any:
    body = case.body
    creating = case.operation.method.upper() == "POST" and case.operation.path == "/api/v1/events"
    positive = case.meta is not None and case.meta.generation.mode.is_positive
    if creating and positive and isinstance(body, dict) and zlib.crc32(str(body.get("client_key")).encode()) % 2 == 0:
        case.body = {**body, **REALISTIC}
    return case
