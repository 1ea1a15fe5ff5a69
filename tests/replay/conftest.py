from tests.runbook.conftest import clock  # noqa: F401 (time stopped for the worker and the callback view alike)
