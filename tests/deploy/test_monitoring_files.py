"""The shipped scrape config, alert rules, Alertmanager config and dashboard: valid, tested by promtool and
amtool, and about metrics that exist."""

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from runbook.metrics.collector import DEPRECATED_SMALLEST_BUDGET, DeliveryCollector

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "alerts.yml"
RULE_TESTS = DEPLOY / "prometheus" / "alerts_test.yml"
SCRAPE_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
ALERTMANAGER_CONFIG = DEPLOY / "prometheus" / "alertmanager.yml"
DASHBOARD = DEPLOY / "grafana" / "reset-delivery.json"


def _tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is missing: install Debian's {package} package (make test and .ci/run do)")
    return path


@pytest.fixture(scope="module")
def promtool() -> str:
    return _tool("promtool", "prometheus")


@pytest.fixture(scope="module")
def amtool() -> str:
    return _tool("amtool", "prometheus-alertmanager")


def test_the_rules_file_is_valid(promtool):
    result = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 16 rules found" in result.stdout


def test_the_scrape_config_is_valid_and_sends_the_metrics_token_as_a_bearer_credential(promtool, tmp_path):
    config = yaml.safe_load(SCRAPE_CONFIG.read_text())
    (job,) = config["scrape_configs"]
    token_file = job["authorization"]["credentials_file"]
    # promtool checks that the credentials file exists, relative to the config's directory.
    for shipped in (SCRAPE_CONFIG, RULES):
        shutil.copy(shipped, tmp_path)
    (tmp_path / token_file).write_text("test-only-metrics-token\n")

    result = subprocess.run(
        [promtool, "check", "config", str(tmp_path / SCRAPE_CONFIG.name)], capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert job["metrics_path"] == "/metrics"
    assert job["authorization"]["type"] == "Bearer"
    assert "credentials" not in job["authorization"], "the token belongs in a file, not in the config"


PAGERDUTY, INDEPENDENT = "pagerduty", "independent"
# The alerts about the road pages travel: they must arrive even when that road is down.
WATCHING_THE_PAGER = {"ResetDeliveryPagesUndelivered", "ResetDeliveryOutboxStuck"}


def _receiver(name: str) -> dict[str, Any]:
    config = yaml.safe_load(ALERTMANAGER_CONFIG.read_text())
    (receiver,) = [receiver for receiver in config["receivers"] if receiver["name"] == name]
    return dict(receiver)


def _routed_to(amtool: str, labels: dict[str, str]) -> list[str]:
    """The receivers Alertmanager would notify for an alert with ``labels``, in routing order."""
    pairs = [f"{name}={value}" for name, value in labels.items()]
    command = [amtool, "config", "routes", "test", f"--config.file={ALERTMANAGER_CONFIG}", *pairs]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip().split(",")


def test_the_alertmanager_config_is_valid_and_keeps_its_secrets_in_files(amtool):
    result = subprocess.run(
        [amtool, "check-config", str(ALERTMANAGER_CONFIG)], capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
    (pagerduty,) = _receiver(PAGERDUTY)["pagerduty_configs"]
    assert pagerduty["routing_key_file"].startswith("/etc/")
    assert "routing_key" not in pagerduty, "the key belongs in a file"
    smtp = yaml.safe_load(ALERTMANAGER_CONFIG.read_text())["global"]
    assert smtp["smtp_auth_password_file"].startswith("/etc/")
    assert "smtp_auth_password" not in smtp, "the password belongs in a file"


def test_the_second_receiver_does_not_go_through_pagerduty():
    assert set(_receiver(INDEPENDENT)) == {"name", "email_configs"}


def test_an_undelivered_page_reaches_the_second_receiver_and_pagerduty_too(amtool):
    labels = {"alertname": "ResetDeliveryPagesUndelivered", "route": "independent"}
    assert _routed_to(amtool, labels) == [INDEPENDENT, PAGERDUTY]


def test_an_alert_without_the_independent_route_goes_to_pagerduty_only(amtool):
    labels = {"alertname": "ResetDeliveryDeadlineAtRisk", "region": "US", "severity": "page"}
    assert _routed_to(amtool, labels) == [PAGERDUTY]


def test_exactly_the_rules_that_watch_the_pager_are_routed_past_it(amtool):
    rules = [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]
    assert {rule["alert"] for rule in rules if rule["labels"].get("route") == INDEPENDENT} == WATCHING_THE_PAGER
    for rule in rules:
        expected = [INDEPENDENT, PAGERDUTY] if rule["alert"] in WATCHING_THE_PAGER else [PAGERDUTY]
        assert _routed_to(amtool, {"alertname": rule["alert"], **rule["labels"]}) == expected, rule["alert"]


def test_the_scrape_failure_alert_watches_the_shipped_job():
    job = yaml.safe_load(SCRAPE_CONFIG.read_text())["scrape_configs"][0]["job_name"]
    assert f'up{{job="{job}"}} == 0' in RULES.read_text()


def test_promtool_unit_tests_pass_on_the_shipped_rules(promtool):
    result = subprocess.run(
        [promtool, "test", "rules", str(RULE_TESTS)], capture_output=True, text=True, timeout=120, cwd=RULES.parent
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_rule_has_a_unit_test():
    rules = set(re.findall(r"- alert: (\w+)", RULES.read_text()))
    tested = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))
    assert rules == tested


def _exported_names() -> set[str]:
    return {family.name for family in DeliveryCollector().describe()}


def _referenced(text: str) -> set[str]:
    names = set(re.findall(r"reset_delivery_[a-z_]+", text))
    # Sample names of histograms and counters, back to their family names.
    return {re.sub(r"_(bucket|count|sum|total)$", "", name) for name in names}


def test_the_rules_use_only_metrics_the_project_exports():
    groups = yaml.safe_load(RULES.read_text())["groups"]
    expressions = [rule["expr"] for group in groups for rule in group["rules"]]
    assert _referenced("\n".join(expressions)) <= _exported_names()


def test_the_rules_and_the_dashboard_use_no_deprecated_metric_name():
    # Still exported for one release (CHANGELOG.md), so the test above would not catch it.
    for shipped in (RULES, RULE_TESTS, DASHBOARD):
        assert DEPRECATED_SMALLEST_BUDGET not in _referenced(shipped.read_text()), shipped.name


def test_the_dashboard_uses_only_metrics_the_project_exports_and_shows_both_distributions_per_region():
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    assert _referenced("\n".join(expressions)) <= _exported_names()
    heatmaps = [panel for panel in dashboard["panels"] if panel["type"] == "heatmap"]
    assert {
        name for panel in heatmaps for name in re.findall(r"reset_delivery_\w+_bucket", panel["targets"][0]["expr"])
    } == {
        "reset_delivery_sms_terminal_seconds_bucket",
        "reset_delivery_fallback_claim_remaining_lifetime_seconds_bucket",
    }
    assert all('region="$region"' in panel["targets"][0]["expr"] for panel in heatmaps)
    assert any(panel.get("repeat") == "region" for panel in dashboard["panels"])
