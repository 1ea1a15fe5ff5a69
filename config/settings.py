"""Settings for the whole project, read from the environment.

With no ``DATABASE_URL`` the project runs on its embedded default: a SQLite
file under ``var/`` and generated development secrets. Any other database
means production-like operation, where every secret must be given explicitly.
"""

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config import devsecrets
from config.env import env_bool, env_list, env_optional_str, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("NOTIFY_VAR_DIR", str(BASE_DIR / "var")))

DATABASE_URL = env_optional_str("DATABASE_URL")
EMBEDDED = DATABASE_URL is None
DEBUG = env_bool("DJANGO_DEBUG", default=EMBEDDED)


_dev = devsecrets.load_or_create(VAR_DIR / "dev-secrets.json") if EMBEDDED else {}


def _dev_only(name: str, dev_key: str) -> str:
    if EMBEDDED:
        return _dev[dev_key]
    raise ImproperlyConfigured(f"{name} must be set when DATABASE_URL is set")


SECRET_KEY = env_optional_str("DJANGO_SECRET_KEY") or _dev_only("DJANGO_SECRET_KEY", "secret_key")
# MultiFernet: the first key encrypts and every key decrypts, so keys rotate by prepending.
NOTIFY_VAULT_KEYS = env_list("NOTIFY_VAULT_KEYS") or [_dev_only("NOTIFY_VAULT_KEYS", "vault_key")]
NOTIFY_RECIPIENT_PEPPER = env_optional_str("NOTIFY_RECIPIENT_PEPPER") or _dev_only(
    "NOTIFY_RECIPIENT_PEPPER", "recipient_pepper"
)

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "django_prometheus",
    "policies",
    "notify",
    "runbook",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

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
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
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

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

# Celery: the broker only carries wake-up hints (event ids); the database is the truth.
# The embedded default uses kombu's filesystem transport, which works across processes
# with no server; production points CELERY_BROKER_URL at Redis or RabbitMQ.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL == "filesystem://":
    _queue_dir = VAR_DIR / "broker"
    for _sub in ("in", "processed"):
        (_queue_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue_dir / "in"),
        "data_folder_out": str(_queue_dir / "in"),
        "processed_folder": str(_queue_dir / "processed"),
        "store_processed": False,
    }

CELERY_BEAT_SCHEDULE = {
    # Retention periods are hours to days long: checking every 10 minutes is plenty.
    "purge-retained-data": {"task": "notify.purge_retained_data", "schedule": 600.0},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
