#!/usr/bin/env bash
# Install the Debian packages the test suite needs, if any is missing:
# chromium (the console's browser tests drive Debian's Chromium; nothing is downloaded), npm
# (installs axe-core, which those tests inject to check accessibility), gcc (mypyc compiles the
# decision code with it, config/native.py),
# prometheus (for promtool, which tests the shipped alert rules) and prometheus-alertmanager
# (for amtool, which checks the shipped Alertmanager config and its routing), and the
# PostgreSQL, Redis and RabbitMQ servers `make test` starts throwaway instances of
# (deploy/test-services.sh): installed, not used as they are.
set -euo pipefail

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v amtool >/dev/null 2>&1 || missing+=(prometheus-alertmanager)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
PATH="$PATH:/usr/sbin" command -v rabbitmq-server >/dev/null 2>&1 || missing+=(rabbitmq-server)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "missing Debian packages: ${missing[*]} (install them with apt-get as root)" >&2
  exit 1
fi
echo "installing Debian packages: ${missing[*]}" >&2
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
