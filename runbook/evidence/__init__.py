"""Policy evidence: projections of a draft over recent history, approvals, and the policy admin."""
