"""The internal API, version 1: services create and follow reset deliveries.

Validation and the OpenAPI document come from the same schemas (django-ninja and
pydantic); every route needs a service token and is rate-limited per service.
"""

from typing import Any

from ninja import NinjaAPI

from notify.api import errors
from notify.api.auth import ServiceTokenAuth
from notify.api.events import router
from notify.api.throttle import PerService

# OpenAPI links: what a stateful client (or fuzzer) may do with a response. A created event's
# event_id is the path parameter of its follow-up read.
LINKS = {
    ("/api/v1/events", "post"): {
        "FollowTheEvent": {
            "operationId": "notify_api_events_follow",
            "parameters": {"event_id": "$response.body#/event_id"},
            "description": "Follow the event this request created (or, on a replay, created before).",
        }
    }
}


class LinkedAPI(NinjaAPI):
    """The API whose OpenAPI document also carries ``LINKS`` on its success responses."""

    def get_openapi_schema(self, *, path_prefix: str | None = None, path_params: Any = None) -> Any:
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        for (path, method), links in LINKS.items():
            for status, response in schema["paths"][path][method]["responses"].items():
                if str(status).startswith("2"):
                    response["links"] = links
        return schema


api = LinkedAPI(
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
