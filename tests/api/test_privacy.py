"""Canary: recognizable destinations and links never appear in an API answer or a log line."""

import logging

from tests.api.payloads import body, post
from tests.factories import CANARY_EMAIL, CANARY_PHONE, CANARY_RESET_URL

CANARIES = (CANARY_PHONE, CANARY_PHONE.lstrip("+"), CANARY_EMAIL, CANARY_RESET_URL, "canary-token")


def test_no_answer_or_log_line_carries_a_phone_address_or_link(api, policy, caplog):
    caplog.set_level(logging.DEBUG)
    created = post(api, body(client_key="canary"))
    answers = [
        created,
        post(api, body(client_key="canary")),  # the same again
        post(api, body(client_key="canary", ttl_seconds=900)),  # a conflict
        post(api, body(phone=CANARY_PHONE + "99999")),  # an invalid phone
        post(api, body(email="canary.subscriber@@example.org")),  # an invalid address
        post(api, body(reset_url=CANARY_RESET_URL.replace("https", "http"))),  # a link that is not https
        post(api, body(phone="+49" + CANARY_PHONE[2:])),  # a destination the policy refuses
        api.get(f"/api/v1/events/{created.json()['event_id']}"),
    ]

    assert [answer.status_code for answer in answers] == [201, 200, 409, 422, 422, 422, 422, 200]
    for answer in answers:
        for canary in CANARIES:
            assert canary not in answer.content.decode(), f"{canary!r} in a {answer.status_code} answer"
    for canary in CANARIES:
        assert canary not in caplog.text
