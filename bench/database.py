"""Create and migrate the benchmark database (never the test or demo one)."""

import psycopg
from django.conf import settings
from django.core.management import call_command


def prepare() -> None:
    db = settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.postgresql":
        raise SystemExit("make bench needs PostgreSQL: set BENCH_DATABASE_URL to a postgres:// URL")
    admin = psycopg.connect(
        host=db["HOST"],
        port=db["PORT"],
        user=db["USER"],
        password=db.get("PASSWORD") or None,
        dbname="postgres",
        autocommit=True,
    )
    with admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [db["NAME"]]).fetchone()
        if not exists:
            admin.execute(f'CREATE DATABASE "{db["NAME"]}"')
    call_command("migrate", verbosity=0)
