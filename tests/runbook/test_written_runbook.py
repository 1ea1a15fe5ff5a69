"""The written runbook has a section for every place that links into it."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _anchors(markdown: str) -> set[str]:
    """The anchors a Markdown renderer gives the headings: lower case, punctuation dropped, spaces as dashes."""
    headings = re.findall(r"^#+ (.+)$", markdown, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def test_every_alert_rule_links_to_a_section_of_the_runbook():
    alerts = (ROOT / "deploy" / "prometheus" / "alerts.yml").read_text()
    linked = set(re.findall(r"docs/runbook\.md#([\w-]+)", alerts))
    assert {"possible-duplicate-email", "provider-refuses-credentials"} <= linked
    assert linked <= _anchors((ROOT / "docs" / "runbook.md").read_text())
