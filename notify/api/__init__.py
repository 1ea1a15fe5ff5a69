"""The internal API, version 1: services create and follow reset deliveries.

Validation and the OpenAPI document come from the same schemas (django-ninja and
pydantic); every route needs a service token and is rate-limited per service.
"""

from ninja import NinjaAPI

from notify.api import errors
from notify.api.auth import ServiceTokenAuth
from notify.api.events import router
from notify.api.throttle import PerService

api = NinjaAPI(
    title="Reset delivery internal API",
    version="1",
    description="Create password-reset deliveries and follow them. Authenticate with `Authorization: Bearer <token>` "
    "(`python manage.py create_service_token <service>`). No response ever contains a phone number, "
    "an email address or a reset link.",
    urls_namespace="api-v1",
    openapi_url="/openapi.json",
    docs_url="/docs",
    auth=ServiceTokenAuth(),
    throttle=PerService(),
)
errors.register(api)
api.add_router("/", router)
