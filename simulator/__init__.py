"""A provider simulator: a Twilio-compatible Messages API, an SMTP sink and a PagerDuty Events v2 stand-in.

The demo, the integration tests, the chaos run and the benchmarks talk to it with the real
``twilio`` client, Django's SMTP backend and the pager client. It counts every message it
accepts per key, which is how "no duplicates" is proven, and logs every page message with the
answer it got, which is how the paging invariants are checked. Start it with ``manage.py
run_simulator``; drive it with :class:`simulator.control.SimulatorControl`.
"""
