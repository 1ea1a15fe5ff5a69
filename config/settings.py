"""Settings for the whole project, read from the environment.

With no ``DATABASE_URL`` the project runs on its embedded default: a SQLite
file under ``var/`` and generated development secrets. Any other database
means production-like operation, where every secret must be given explicitly.
"""

import importlib.util
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from config import devsecrets, lanes
from config.env import env_bool, env_float, env_int, env_list, env_optional_str, env_rate, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("NOTIFY_VAR_DIR", str(BASE_DIR / "var")))

DATABASE_URL = env_optional_str("DATABASE_URL")
EMBEDDED = DATABASE_URL is None
DEBUG = env_bool("DJANGO_DEBUG", default=EMBEDDED)


_dev = devsecrets.load_or_create(VAR_DIR / "dev-secrets.json") if EMBEDDED else {}


def _embedded_only(name: str, embedded_default: str) -> str:
    """Return what an unset ``name`` means on the embedded default; production must set it."""
    if EMBEDDED:
        return embedded_default
    # No fallback outside the demo: a guessed secret, account or host fails later and quietly.
    raise ImproperlyConfigured(f"{name} must be set when DATABASE_URL is set")


def _dev_only(name: str, dev_key: str) -> str:
    return _embedded_only(name, _dev.get(dev_key, ""))


SECRET_KEY = env_optional_str("DJANGO_SECRET_KEY") or _dev_only("DJANGO_SECRET_KEY", "secret_key")
# MultiFernet: the first key encrypts and every key decrypts, so keys rotate by prepending.
NOTIFY_VAULT_KEYS = env_list("NOTIFY_VAULT_KEYS") or [_dev_only("NOTIFY_VAULT_KEYS", "vault_key")]
NOTIFY_RECIPIENT_PEPPER = env_optional_str("NOTIFY_RECIPIENT_PEPPER") or _dev_only(
    "NOTIFY_RECIPIENT_PEPPER", "recipient_pepper"
)

# The provider simulator's own listening ports (demo, tests, chaos run, benchmarks).
SIMULATOR_HTTP_PORT = env_int("SIMULATOR_HTTP_PORT", 8025, minimum=0)
SIMULATOR_SMTP_PORT = env_int("SIMULATOR_SMTP_PORT", 2525, minimum=0)

# Providers. On the embedded default both point at the provider simulator
# (`manage.py run_simulator`); in production TWILIO_API_BASE is unset (the real API).
TWILIO_ACCOUNT_SID = env_optional_str("TWILIO_ACCOUNT_SID") or _embedded_only("TWILIO_ACCOUNT_SID", "AC" + "5" * 32)
TWILIO_AUTH_TOKEN = env_optional_str("TWILIO_AUTH_TOKEN") or _dev_only("TWILIO_AUTH_TOKEN", "twilio_auth_token")
TWILIO_API_BASE = env_optional_str("TWILIO_API_BASE") or (
    f"http://127.0.0.1:{SIMULATOR_HTTP_PORT}" if EMBEDDED else None
)
# Seconds the SMS client waits for Twilio; past it the outcome is unknown and is recovered by lookup.
TWILIO_TIMEOUT = env_float("TWILIO_TIMEOUT", 10.0, minimum=0.1)
# The public address providers call back on; status callback URLs are built from it and
# signatures are checked against exactly that URL (a proxy in front must not change it).
# Required outside the embedded default: a wrong guess would fail every callback's signature.
PUBLIC_BASE_URL = env_optional_str("PUBLIC_BASE_URL") or ("http://127.0.0.1:8000" if EMBEDDED else "")
if not PUBLIC_BASE_URL:
    raise ImproperlyConfigured("PUBLIC_BASE_URL must be set when DATABASE_URL is set")
PUBLIC_BASE_URL = PUBLIC_BASE_URL.rstrip("/")
# Accounts that sign webhooks with a shared key (HMAC-SHA256) instead of the auth token.
TWILIO_WEBHOOK_SIGNING_KEY = env_str("TWILIO_WEBHOOK_SIGNING_KEY")

EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
# Required outside the embedded default, like the Twilio account: a loopback guess would send
# every fallback email nowhere, noticed only when a reset is already failing.
EMAIL_HOST = env_optional_str("EMAIL_HOST") or _embedded_only("EMAIL_HOST", "127.0.0.1")
EMAIL_PORT = env_int("EMAIL_PORT", SIMULATOR_SMTP_PORT if EMBEDDED else 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", default=not EMBEDDED)
# Seconds one SMTP reply may take; a timeout after DATA is an unknown outcome.
EMAIL_TIMEOUT = env_float("EMAIL_TIMEOUT", 5.0, minimum=0.1)
# Seconds the whole SMTP exchange may take, DNS and every reply included. The worker holds
# its lease for this plus NOTIFY_LEASE_MARGIN, so a slow relay never outlives the lease.
EMAIL_SEND_DEADLINE = env_float("EMAIL_SEND_DEADLINE", 4 * EMAIL_TIMEOUT, minimum=0.1)
# The name given in EHLO. Django's default asks DNS for this host's FQDN, a lookup no timeout bounds.
EMAIL_LOCAL_HOSTNAME = env_str("EMAIL_LOCAL_HOSTNAME", "localhost")

# After an unknown SMS outcome, wait this long before the first lookup, so a message the
# provider created a moment ago has time to show in its list.
NOTIFY_SMS_LOOKUP_DELAY = timedelta(seconds=env_float("NOTIFY_SMS_LOOKUP_DELAY", 2.0, minimum=0))
# How long Twilio may go on processing a create our client gave up on (a read timeout, a 502
# or 504). Twilio documents no bound: its 20500 page says a 500 can be "a timeout in the API"
# after which the message may still exist, and its own outbound HTTP gives up after 15 s in
# total. "Not found" proves a message absent only once this much has passed since the submit
# started (after our own call's bound); before it the worker looks again, and past the
# fallback deadline it sends the email rather than a second SMS.
TWILIO_PROCESSING_HORIZON = timedelta(seconds=env_float("TWILIO_PROCESSING_HORIZON", 60.0, minimum=0))
# Twilio's phone number redaction (an account setting) masks the destination in every API
# answer: recovery lookups can then find a message by its body, but never prove one absent.
TWILIO_PHONE_REDACTION = env_bool("TWILIO_PHONE_REDACTION", default=False)
# The SMS senders (as the policies name them: numbers, messaging service SIDs, sender IDs) that
# no one but this deployment sends from: no other product, account or service. Where the
# provider keeps no body, a recovery lookup takes a listed message to be ours only if it came
# from one of these (and phone numbers are not redacted); from any other sender it proves
# nothing, and the event is settled by our status callback or by the email at D. Checked at
# start-up (``notify.checks``).
TWILIO_EXCLUSIVE_SENDERS = env_list("TWILIO_EXCLUSIVE_SENDERS")
# Taken off every lease, so the holder's last write lands before anyone may take over.
NOTIFY_LEASE_MARGIN = timedelta(seconds=env_float("NOTIFY_LEASE_MARGIN", 5.0, minimum=0))
# The name this host's clock offset is reported under in /metrics (default: the host name).
NOTIFY_HOST_NAME = env_str("NOTIFY_HOST_NAME")
# Whose clock judges deadlines: "database" (the default: hosts' clocks may disagree, the
# database is one) or "system" (this host's: a single-host set-up, or tests that freeze time).
NOTIFY_CLOCK = env_str("NOTIFY_CLOCK", "database")
if NOTIFY_CLOCK not in ("database", "system"):
    raise ImproperlyConfigured('NOTIFY_CLOCK must be "database" or "system"')
# Test runs only: play a host whose wall clock is this many seconds off (the chaos run sets
# +30 and -30 on two workers). Deadlines are judged on the database's clock regardless.
NOTIFY_CLOCK_OFFSET = env_float("NOTIFY_CLOCK_OFFSET", 0.0)


ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost"])

INSTALLED_APPS = [
    # The admin with its login throttled like the console's (runbook/console/logins.py).
    "config.apps.AdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "csp",
    "ninja",
    "django_prometheus",
    "policies",
    "notify",
    "runbook",
]
# The provider simulator (simulator/) is a demo and test tool the product never imports. Its
# commands are there where its optional dependencies are installed (`pip install .[simulator]`;
# make demo and make test do): a production host installs neither, and loads nothing of it.
if importlib.util.find_spec("aiohttp") is not None:
    INSTALLED_APPS.append("simulator")

MIDDLEWARE = [
    # /healthz and /readyz, answered before the host check, the HTTPS redirect and the metrics
    # see the probe (config/probes.py says why).
    "config.probes.ProbeMiddleware",
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files, after the HTTPS redirect and the security headers, before everything else.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "config.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "config.middleware.AuthenticationMiddleware",
    "config.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "config.middleware.CSPMiddleware",
    "config.middleware.HtmxMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

# Paths that programs call, not people: the internal API (its documentation page excepted) and
# Twilio's callbacks. The console's middleware (sessions, users, messages, the CSP header,
# htmx) is skipped on them: config/middleware.py.
MACHINE_PATHS = ("/api/v1/events", "/api/v1/whoami", "/callbacks/")
# Seconds /readyz waits on the database, to connect (at least 2: libpq's floor) and for its
# answer. The broker is given the bound every publish has: NOTIFY_BROKER_PUBLISH_TIMEOUT.
READYZ_DATABASE_TIMEOUT = env_float("READYZ_DATABASE_TIMEOUT", 2.0, minimum=0.1)

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

if DATABASE_URL:
    # Connections are kept for CONN_MAX_AGE and checked before their first use in each
    # request or task (CONN_HEALTH_CHECKS): one that PostgreSQL dropped (a restart,
    # pg_terminate_backend) is replaced before a statement fails on it.
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # The same backend, with a health check that asks the socket, not the server (config/database).
        DATABASES["default"]["ENGINE"] = "config.database"
        # notify.writes has PostgreSQL prepare its hot statements (a creation's INSERT, a
        # transition's write, the leases) once per connection; Django turns prepared statements
        # off by default for connection poolers that cannot keep them, and its own cursors,
        # which bind values client side, never prepare. Behind PgBouncer in transaction mode
        # before 1.21 (or without max_prepared_statements), set DATABASE_PREPARED_STATEMENTS=false.
        if env_bool("DATABASE_PREPARED_STATEMENTS", default=True):
            DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = 0
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(VAR_DIR / "embedded.sqlite3"),
            "OPTIONS": {
                # The demo runs web, worker, beat and simulator as separate processes on
                # one file: WAL lets readers proceed during a write, IMMEDIATE takes the
                # write lock at BEGIN (so a transaction never fails mid-way upgrading a
                # read lock), and the timeout waits for the lock instead of raising
                # "database is locked".
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

_cache_url = env_optional_str("REDIS_CACHE_URL")
# The internal API: requests per service in any moving window of the period, and the largest
# request body accepted (413 beyond it).
API_RATE_LIMIT = env_rate("API_RATE_LIMIT", "1200/min")
# Where every rate limit and failure count is kept (plumbing/ratelimit.py; a `limits` storage URI):
# Redis when REDIS_CACHE_URL is set, so every web process counts together; per process otherwise.
RATE_LIMIT_STORAGE = _cache_url or "memory://"
# Requests without a valid token, per client address: past it the address gets 429 before
# its token is even looked up, so a flood of bad tokens costs no database query.
API_AUTH_FAILURES_PER_CLIENT = env_rate("API_AUTH_FAILURES_PER_CLIENT", "30/min")
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("API_MAX_BODY_BYTES", 16 * 1024, minimum=1024)
# How long a read of the cache's Redis (the API's rate limits, the login throttle) may wait, to
# connect or for an answer: Redis answers in a millisecond, and a request should not hang on a
# dead or stuck one. The API then goes on uncounted (notify/api/throttle.py).
_cache_timeout = env_float("REDIS_CACHE_TIMEOUT", 0.25, minimum=0.01)
REDIS_CACHE_OPTIONS = {"socket_connect_timeout": _cache_timeout, "socket_timeout": _cache_timeout}
CACHES = {
    "default": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": _cache_url,
            "OPTIONS": REDIS_CACHE_OPTIONS,
        }
        if _cache_url
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
# The web process serves its own static files (WhiteNoise's middleware). `collectstatic`
# writes each file under a name with its content's hash, a gzip copy beside it, and a manifest;
# {% static %} then links the hashed name, which WhiteNoise serves with a year's Cache-Control
# (new content is a new name, so nothing stale is ever cached). Without the manifest no page can
# name its assets: the deploy runs collectstatic (docs/operations.md). With DEBUG (the demo) the
# plain names are linked and served from the sources.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "runbook:events"
LOGOUT_REDIRECT_URL = "login"
# Failed console and admin logins allowed per client address and per account name before
# the login form answers 429 until the oldest leaves the moving window. Lower per client
# than per account, so one address alone can never lock a responder out; the account limit
# stops guessing spread over many addresses.
LOGIN_FAILURES_PER_CLIENT = env_rate("LOGIN_FAILURES_PER_CLIENT", "10/15min")
LOGIN_FAILURES_PER_ACCOUNT = env_rate("LOGIN_FAILURES_PER_ACCOUNT", "20/15min")

# The console serves its scripts (htmx, pinned through django-htmx) and styles itself, so
# the policy allows nothing but its own origin: no inline script or style, no framing.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF],
        "connect-src": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
        "base-uri": [NONE],
        "object-src": [NONE],
    }
}

# Transport security. Production (a DATABASE_URL) is served over HTTPS unless DJANGO_HTTPS
# says otherwise (a test run on plain loopback); the embedded default is plain HTTP.
HTTPS = env_bool("DJANGO_HTTPS", default=not EMBEDDED)
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = HTTPS
# Prometheus scrapes over the internal network, usually in plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
# The bearer token Prometheus presents for /metrics (runbook/metrics/endpoint.py). Unset in
# production, /metrics refuses every scrape (403) and `check --deploy` says why: the service
# keeps delivering resets, the refused scrape shows in Prometheus as `up == 0`, and nothing
# is ever served without a token. The embedded default generates one (var/dev-secrets.json).
METRICS_TOKEN = env_optional_str("METRICS_TOKEN") or (_dev["metrics_token"] if EMBEDDED else None)
SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 31_536_000 if HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", default=True)
# Behind a TLS-terminating proxy, trust its X-Forwarded-Proto (and only then: a client could
# otherwise claim HTTPS over plain HTTP).
if env_bool("DJANGO_BEHIND_TLS_PROXY"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# How many proxies of ours in front append to X-Forwarded-For. The login and API throttles
# count per client address: the one the outermost of them saw, or REMOTE_ADDR when 0 (the
# header is then ignored, since any client can send it).
PROXY_HOPS = env_int("DJANGO_PROXY_HOPS", 0, minimum=0)
SESSION_COOKIE_HTTPONLY = True
# A responder's console session lasts one shift.
SESSION_COOKIE_AGE = env_int("DJANGO_SESSION_SECONDS", 12 * 3600, minimum=300)

# Celery: the broker only carries wake-up hints (event ids); the database is the truth.
# The embedded default uses kombu's filesystem transport, which works across processes
# with no server; production points CELERY_BROKER_URL at Redis or RabbitMQ.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL == "filesystem://":
    _queue_dir = VAR_DIR / "broker"
    for _sub in ("in", "processed", "control"):
        (_queue_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue_dir / "in"),
        "data_folder_out": str(_queue_dir / "in"),
        "processed_folder": str(_queue_dir / "processed"),
        # Broadcast (remote control) exchanges: under var/, not the working directory.
        "control_folder": str(_queue_dir / "control"),
        "store_processed": False,
    }

elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # An unacknowledged message (a killed worker's, thanks to late acks) comes back after
    # this long. Our countdowns are at most a poll interval, far below it, so no ETA task
    # is redelivered early (celery #4400); the sweeper finds anything lost much sooner.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 300, minimum=60)}

# At-least-once wake-ups: a task is acknowledged only after it ran (late acks), a task
# whose worker died is put back (reject on worker lost), and each worker process holds
# one message at a time (prefetch 1), so a killed process strands at most one wake-up.
# Running a step twice is harmless: the lease and ``decide`` make the second a no-op.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# How long a publish to the broker may wait: to connect, and on Redis for its answer too (kombu's
# AMQP transport bounds only the connection). A hint must not hold a creation's request, or a
# worker's thread, on a broker that accepts connections and never answers: a stopped Redis held a
# publish for ever (measured). After a wake-up that failed, a process sends none for
# NOTIFY_BROKER_RETRY_SECONDS: the sweeper enqueues those events (notify/tasks.py).
NOTIFY_BROKER_PUBLISH_TIMEOUT = env_float("NOTIFY_BROKER_PUBLISH_TIMEOUT", 0.5, minimum=0.01)
NOTIFY_BROKER_RETRY_SECONDS = env_float("NOTIFY_BROKER_RETRY_SECONDS", 5.0, minimum=0.1)
# Celery's Django fixup closes the database connection around every task unless this is
# set: a new PostgreSQL connection per step took a quarter of a worker's time under load
# (py-spy, bench e2e-profile). Kept instead, and recycled after this many tasks;
# config/celery.py gives each task the connection hygiene Django gives each request.
CELERY_DB_REUSE_MAX = env_int("CELERY_DB_REUSE_MAX", 1000, minimum=1)
# Our LOGGING config (JSON in production) applies to the worker too.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# The sweeper is the truth behind the broker's wake-up hints: how often it looks for
# events whose next action is due, how many it takes per batch, and how long an
# event it re-enqueued rests before it may be re-enqueued again.
NOTIFY_SWEEP_INTERVAL = env_float("NOTIFY_SWEEP_INTERVAL", 2.0, minimum=0.1)
NOTIFY_SWEEP_BATCH = env_int("NOTIFY_SWEEP_BATCH", 500, minimum=1)
NOTIFY_SWEEP_REDELIVER_AFTER = timedelta(seconds=env_float("NOTIFY_SWEEP_REDELIVER_AFTER", 10.0, minimum=1))

# A step that raises is counted on its event, which backs off before its next step: this long
# after the first failure in a row, doubling with each, at most NOTIFY_STEP_BACKOFF_MAX (and
# never past the event's expiry, which needs no rendering and so still happens on time).
# After NOTIFY_FAILING_AFTER failures in a row the event is failing: paged and shown as such.
NOTIFY_STEP_BACKOFF = timedelta(seconds=env_float("NOTIFY_STEP_BACKOFF", 5.0, minimum=0.1))
NOTIFY_STEP_BACKOFF_MAX = timedelta(seconds=env_float("NOTIFY_STEP_BACKOFF_MAX", 120.0, minimum=0.1))
NOTIFY_FAILING_AFTER = env_int("NOTIFY_FAILING_AFTER", 3, minimum=1)

# Paging on an exhausted action budget (reset_delivery_deadline_at_risk). The evaluator runs
# this often; pages go to a PagerDuty Events v2 compatible endpoint, one routing key per region
# ("US=key,EU=key"). A region in page mode without a key keeps its pages queued, not lost.
NOTIFY_RISK_INTERVAL = env_float("NOTIFY_RISK_INTERVAL", 5.0, minimum=0.5)

# Policy drafts are judged on evidence (runbook/evidence/projections.py): a replay of the region's last
# PROJECTION_WINDOW_DAYS of history (never past the observation retention) against the draft and
# the published version. With fewer than PROJECTION_MIN_RECORDS records in it, a seeded generated
# set of PROJECTION_GENERATED_RECORDS is replayed instead, and the projection says so. A draft
# whose projection breaks a POLICY_TARGETS entry (METRIC<=N or METRIC<=N%, replay's metrics) is
# marked, and approving it needs a written reason.
PROJECTION_WINDOW_DAYS = env_int("PROJECTION_WINDOW_DAYS", 7, minimum=1)
PROJECTION_MIN_RECORDS = env_int("PROJECTION_MIN_RECORDS", 1000, minimum=1)
PROJECTION_GENERATED_RECORDS = env_int("PROJECTION_GENERATED_RECORDS", 20000, minimum=100)
POLICY_TARGETS = env_list("POLICY_TARGETS", ["useless_fallbacks<=0", "pages_without_action<=0"])
PAGER_EVENTS_URL = env_str("PAGER_EVENTS_URL", "https://events.pagerduty.com/v2/enqueue")
# The whole of one POST (lookup, connect, TLS, request, reply) under one deadline.
PAGER_TIMEOUT = env_float("PAGER_TIMEOUT", 5.0, minimum=0.1)
# POSTs in flight at once per delivery run: a pager that times out holds a run for
# BATCH / PAGER_CONCURRENCY deadlines, not BATCH of them.
PAGER_CONCURRENCY = env_int("PAGER_CONCURRENCY", 4, minimum=1)
# Messages per minute per routing key, all deliverers together: PagerDuty takes about 120
# a minute per integration key; the rest of its limit is left for the burst (pager_quota).
PAGER_EVENTS_PER_MINUTE = env_float("PAGER_EVENTS_PER_MINUTE", 100.0, minimum=1)
PAGER_ROUTING_KEYS: dict[str, str] = {}
for _pair in env_list("PAGER_ROUTING_KEYS"):
    _region, _, _key = _pair.partition("=")
    if not _region.strip() or not _key.strip():
        raise ImproperlyConfigured(f"PAGER_ROUTING_KEYS must be REGION=key pairs, got {_pair!r}")
    PAGER_ROUTING_KEYS[_region.strip()] = _key.strip()

# Each periodic job on a lane of its own (config/lanes.py says why).
CELERY_TASK_ROUTES = lanes.ROUTES

CELERY_BEAT_SCHEDULE = {
    "sweep-due-events": {
        "task": "notify.sweep",
        "schedule": NOTIFY_SWEEP_INTERVAL,
        # A sweep that waited longer than one interval is superseded by the next one.
        "options": {"expires": NOTIFY_SWEEP_INTERVAL},
    },
    # No expiry: a run that waited is caught up, never dropped (runbook.tasks.evaluate_risk).
    "evaluate-risk": {"task": "runbook.evaluate_risk", "schedule": NOTIFY_RISK_INTERVAL},
    # The outbox's safety net: new pages are sent at once; this retries what failed.
    "deliver-pages": {"task": "runbook.deliver_pages", "schedule": NOTIFY_RISK_INTERVAL, "options": {"expires": 30}},
    "roll-up-metrics": {"task": "notify.roll_up_metrics", "schedule": 10.0, "options": {"expires": 10.0}},
    # Retention periods are hours to days long: checking every 10 minutes is plenty.
    "purge-retained-data": {"task": "notify.purge_retained_data", "schedule": 600.0},
}

# One line per worker step, callback and transition. JSON in production (one object
# per line, for the log pipeline), readable key=value lines on the embedded default.
LOG_FORMAT = env_str("LOG_FORMAT", "text" if EMBEDDED else "json")
if LOG_FORMAT not in ("json", "text"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be json or text, got {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger", "message": "event"},
        },
        "text": {"()": "config.logformat.ReadableFormatter", "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        # The twilio library (INFO) and urllib3 (DEBUG) log request URLs, whose query
        # strings can carry a destination number.
        "twilio": {"level": "WARNING"},
        "urllib3": {"level": "WARNING"},
    },
}
