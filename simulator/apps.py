from django.apps import AppConfig


class SimulatorConfig(AppConfig):
    """The provider simulator's management commands (``run_simulator``, ``demo_feed``); no models."""

    name = "simulator"
    verbose_name = "Provider simulator (demo and tests only)"
