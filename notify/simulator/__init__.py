"""A provider simulator: a Twilio-compatible Messages API and an SMTP sink in one process.

The demo, the integration tests, the chaos run and the benchmarks talk to it with the real
``twilio`` client and Django's SMTP backend. It counts every message it accepts per key, which
is how "no duplicates" is proven. Start it with ``manage.py run_simulator``; drive it with
:class:`notify.simulator.control.SimulatorControl`.
"""
