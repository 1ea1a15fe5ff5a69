"""Every client error as one JSON shape, ``Error``, with the right status, and never an input value."""

import logging
import re
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, Throttled, ValidationError

from notify.api.throttle import TooManyAuthFailures

log = logging.getLogger("notify.api")


def error_body(code: str, message: str, fields: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"error": code, "message": message, "fields": fields or []}


def _log_refused(request: HttpRequest, status: int, code: str) -> None:
    # The path and the code only: a refused request's values are the caller's input.
    log.info("api_refused", extra={"path": request.path, "status": status, "error": code})


def register(api: NinjaAPI) -> None:
    def respond(request: HttpRequest, status: int, code: str, message: str, **extra: Any) -> HttpResponse:
        _log_refused(request, status, code)
        return api.create_response(request, error_body(code, message, **extra), status=status)

    @api.exception_handler(AuthenticationError)
    def unauthorized(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
        response = respond(request, 401, "unauthorized", "a valid, unrevoked service token is required as 'Bearer'")
        response["WWW-Authenticate"] = 'Bearer realm="reset-delivery"'
        return response

    @api.exception_handler(Throttled)
    def throttled(request: HttpRequest, exc: Throttled) -> HttpResponse:
        # ninja adds Retry-After (whole seconds) to this response.
        rate = settings.API_RATE_LIMIT
        return respond(
            request, 429, "rate_limited", f"this service may make {rate.limit} requests in any {rate.seconds} s"
        )

    @api.exception_handler(TooManyAuthFailures)
    def auth_throttled(request: HttpRequest, exc: TooManyAuthFailures) -> HttpResponse:
        # Raised during authentication, where ninja adds no Retry-After: added here.
        message = f"too many requests without a valid service token from this address; retry in {exc.wait} s"
        response = respond(request, 429, "rate_limited", message)
        response["Retry-After"] = str(exc.wait)
        return response

    @api.exception_handler(ValidationError)
    def invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
        # Pydantic's messages describe the rule broken, not the value (ninja drops "input").
        fields = [_field_error(error) for error in exc.errors]
        unknown = [error["field"] for error in fields if error["message"] == UNKNOWN_FIELD_MESSAGE]
        if unknown:
            message = f"unknown field(s): {', '.join(unknown)}; the API does not ignore a field it does not know"
            return respond(request, 422, "unknown_field", message, fields=fields)
        return respond(request, 422, "invalid_request", "the request is not valid; see fields", fields=fields)

    @api.exception_handler(RequestDataTooBig)
    def too_large(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return respond(request, 413, "too_large", f"the request body exceeds {limit} bytes")

    @api.exception_handler(Http404)
    def not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
        return respond(request, 404, "not_found", "no such resource for this service")

    @api.exception_handler(HttpError)
    def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
        # ninja raises 400 "Cannot parse request body" for JSON it cannot read.
        code = "malformed_request" if exc.status_code == 400 else "http_error"
        return respond(request, exc.status_code, code, str(exc))


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 400 (``handler400``): what it refuses before any view, in the API's shape on its paths.

    Django answers a request it will not serve (a Host header not in DJANGO_ALLOWED_HOSTS, too
    many form fields) with this before the API sees it; a service reading the API's errors gets
    ``Error``, not an HTML page (the fuzzer sent such a Host). The refused value is not repeated.
    """
    if not request.path_info.startswith("/api/"):
        return defaults.bad_request(request, exception)
    _log_refused(request, 400, "malformed_request")
    message = "the request cannot be served as sent (for example, its Host header is not one this service answers to)"
    return JsonResponse(error_body("malformed_request", message), status=400)


UNKNOWN_FIELD_MESSAGE = "unknown field"
# A field's name is echoed only when it looks like one: a key is the caller's input, and
# nothing a caller sends (a phone number as a key, say) is ever repeated back.
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,63}$")


def _field_error(error: dict[str, Any]) -> dict[str, str]:
    name = _field(error["loc"])
    if error.get("type") == "extra_forbidden":
        return {
            "field": name if _NAME.match(name) else "(a field whose name is not shown)",
            "message": UNKNOWN_FIELD_MESSAGE,
        }
    return {"field": name, "message": str(error["msg"])}


def _field(location: Any) -> str:
    """Name the field an error is about: ``("body", "payload", "phone")`` -> ``phone``."""
    parts = [str(part) for part in location]
    if parts[:1] == ["body"]:
        parts = parts[2:]
    return ".".join(parts) or "body"
