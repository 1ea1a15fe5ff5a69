"""Log lines: one JSON object per line in production, readable key=value lines in the demo."""

import copy
import json
import logging
import logging.config
from typing import Any

import pytest
from django.conf import settings


@pytest.fixture
def configured_logging(capsys):
    def configure(log_format):
        config: dict[str, Any] = copy.deepcopy(settings.LOGGING)
        config["handlers"]["console"] = {
            "class": "logging.StreamHandler",
            "formatter": log_format,
            "stream": "ext://sys.stdout",
        }
        logging.config.dictConfig(config)

    yield configure
    logging.config.dictConfig(settings.LOGGING)


def test_a_production_log_line_is_one_json_object_with_the_events_fields(configured_logging, capsys):
    configured_logging("json")

    logging.getLogger("notify.worker").info("step", extra={"event_id": "evt_1", "result": "done", "version": 3})

    line = json.loads(capsys.readouterr().out.strip())
    assert {key: line[key] for key in ("level", "logger", "event", "event_id", "result", "version")} == {
        "level": "INFO",
        "logger": "notify.worker",
        "event": "step",
        "event_id": "evt_1",
        "result": "done",
        "version": 3,
    }
    assert "time" in line


def test_a_demo_log_line_shows_the_fields_as_key_value_pairs(configured_logging, capsys):
    configured_logging("text")

    logging.getLogger("notify.worker").info("step", extra={"event_id": "evt_1", "result": "done"})

    assert capsys.readouterr().out.strip().endswith("INFO notify.worker step event_id=evt_1 result=done")


def test_the_twilio_librarys_request_logging_is_held_back(configured_logging, capsys):
    configured_logging("text")

    logging.getLogger("twilio.http_client").info("GET Request: https://api.twilio.com/...?To=%2B14155550123")

    assert capsys.readouterr().out == ""
