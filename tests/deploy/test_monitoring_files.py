"""The shipped scrape config, alert rules and dashboard: valid, tested by promtool, and about metrics that exist."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from runbook.metrics import DeliveryCollector

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "alerts.yml"
RULE_TESTS = DEPLOY / "prometheus" / "alerts_test.yml"
SCRAPE_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
DASHBOARD = DEPLOY / "grafana" / "reset-delivery.json"


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is missing: install Debian's prometheus package (make test and .ci/run do)")
    return path


def test_the_rules_file_is_valid(promtool):
    result = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 13 rules found" in result.stdout


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
