"""Paging: which events are at risk, the page outbox and its delivery to PagerDuty, and the paging invariants."""
