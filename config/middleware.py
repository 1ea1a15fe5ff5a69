"""The console's middleware, kept off the machine paths.

The internal API and Twilio's callbacks are answered to programs that authenticate each
request themselves (a bearer token, a request signature): they have no session, no logged-in
user, no flash messages, no page to protect with a CSP and no htmx. Running the console's
middleware on them cost each such request CPU (docs/scaling.md) and could
only add a cookie or a header no client reads. Everything else (the console, admin, login,
the API's own documentation page) keeps all of it. SecurityMiddleware, CommonMiddleware, CSRF and
X-Frame-Options run on every path as before (the API and callback views are exempt from CSRF
by their own decorators; X-Frame-Options costs one header, and `check --deploy` looks for
Django's own class by name).
"""

from collections.abc import Callable
from typing import TypeVar

from csp.middleware import CSPMiddleware as _CSPMiddleware
from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware as _AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware as _MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware as _SessionMiddleware
from django.http import HttpRequest, HttpResponseBase
from django_htmx.middleware import HtmxMiddleware as _HtmxMiddleware


def for_machine(request: HttpRequest) -> bool:
    """Whether this request is on a path that programs call, not people (settings.MACHINE_PATHS)."""
    return request.path_info.startswith(settings.MACHINE_PATHS)


M = TypeVar("M")


def console_only(middleware: type[M]) -> type[M]:
    """The middleware, skipped entirely on the machine paths.

    Skipping the whole __call__ (not single hooks) keeps each middleware's own order of
    request and response work intact wherever it does run.
    """

    class ConsoleOnly(middleware):  # type: ignore[valid-type,misc]
        get_response: Callable[[HttpRequest], HttpResponseBase]

        def __call__(self, request: HttpRequest) -> HttpResponseBase:
            if for_machine(request):
                return self.get_response(request)
            return super().__call__(request)  # type: ignore[no-any-return]

    ConsoleOnly.__name__ = ConsoleOnly.__qualname__ = middleware.__name__
    ConsoleOnly.__module__ = __name__
    return ConsoleOnly


SessionMiddleware = console_only(_SessionMiddleware)
AuthenticationMiddleware = console_only(_AuthenticationMiddleware)
MessageMiddleware = console_only(_MessageMiddleware)
CSPMiddleware = console_only(_CSPMiddleware)
HtmxMiddleware = console_only(_HtmxMiddleware)
