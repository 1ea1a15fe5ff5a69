"""The on-call console: its pages, actions, access, the operator's audit trail and the log-in throttle."""
