from typing import Any

from django.apps import AppConfig
from django.core import checks
from django.db.models.signals import post_migrate

from runbook.metrics.endpoint import check_metrics_token


def _create_roles(sender: AppConfig, **kwargs: Any) -> None:
    from runbook.console.roles import ensure_groups  # models are importable only once apps are ready

    ensure_groups()


class RunbookConfig(AppConfig):
    name = "runbook"
    verbose_name = "On-call console"

    def ready(self) -> None:
        # After every migrate (and every test-database flush), after auth has created this
        # app's permissions: the role groups exist with exactly their permissions.
        post_migrate.connect(_create_roles, sender=self)
        _register_metrics()
        checks.register(check_metrics_token, checks.Tags.security, deploy=True)


_registered = False


def _register_metrics() -> None:
    """Add the domain's metrics to the registry ``/metrics`` serves (read only when scraped)."""
    global _registered
    if _registered:
        return
    from prometheus_client import REGISTRY

    from runbook.metrics.collector import DeliveryCollector

    REGISTRY.register(DeliveryCollector())
    _registered = True
