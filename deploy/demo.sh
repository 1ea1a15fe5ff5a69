#!/usr/bin/env bash
# Run the whole system on the embedded defaults: web console, worker, beat, provider
# simulator and a feeder of demo events. Ctrl-C stops every process (honcho forwards it).
set -euo pipefail
cd "$(dirname "$0")/.."
unset DATABASE_URL CELERY_BROKER_URL TWILIO_API_BASE EMAIL_PORT
export PUBLIC_BASE_URL="http://127.0.0.1:${DEMO_PORT:-8000}"
python manage.py migrate --no-input
python manage.py load_policies
python manage.py demo_setup
exec honcho --procfile deploy/Procfile.demo --app-root . start
