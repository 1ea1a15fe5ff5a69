#!/usr/bin/env bash
# The services `make test` needs, its own: a throwaway PostgreSQL, Redis and RabbitMQ under
# var/test-services on free ports for the length of one command, then stopped and removed.
# A service given by URL is used as it is instead (and left alone):
#   TEST_POSTGRES  e.g. postgres://postgres@127.0.0.1:5432   (a server; the tests create their databases)
#   TEST_REDIS     e.g. redis://127.0.0.1:6379                (the tests use databases 13 and 15)
#   TEST_AMQP      e.g. amqp://guest:guest@127.0.0.1:5672//   (with TEST_RABBITMQ_NODE for rabbitmqctl)
# Usage: deploy/test-services.sh run <command...>   (the command sees the four variables set)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${1:-}" = run ] && shift || { echo "usage: $0 run <command...>" >&2; exit 2; }

DIR="$PWD/var/test-services"
STOPS=()
stop_all() {
  for stop in "${STOPS[@]}"; do eval "$stop" >/dev/null 2>&1 || true; done
  rm -rf "$DIR"
}
trap stop_all EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# PostgreSQL and RabbitMQ refuse to run as root: as root, run them as their own users.
as_user() { local user=$1; shift; if [ "$(id -u)" -eq 0 ]; then runuser -u "$user" -- "$@"; else "$@"; fi; }
own() { if [ "$(id -u)" -eq 0 ]; then chown -R "$1" "$2"; fi; }
wait_for() { for _ in $(seq 1 120); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done; echo "timed out: $*" >&2; return 1; }

rm -rf "$DIR"
mkdir -p "$DIR"
chmod 755 "$DIR"

if [ -z "${TEST_POSTGRES:-}" ]; then
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  port=$(free_port)
  mkdir -p "$DIR/postgres"
  own postgres "$DIR/postgres"
  as_user postgres "$bin/initdb" -D "$DIR/postgres/data" -U postgres --auth=trust -E UTF8 --no-sync >/dev/null
  # Throwaway: nothing needs to survive a crash, so nothing waits for the disk.
  as_user postgres "$bin/pg_ctl" -D "$DIR/postgres/data" -l "$DIR/postgres/log" -w -o \
    "-p $port -c listen_addresses=127.0.0.1 -k $DIR/postgres -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
    start >/dev/null
  STOPS+=("as_user postgres $bin/pg_ctl -D $DIR/postgres/data -m immediate stop")
  export TEST_POSTGRES="postgres://postgres@127.0.0.1:$port"
  echo "test services: PostgreSQL on $port" >&2
fi

if [ -z "${TEST_REDIS:-}" ]; then
  port=$(free_port)
  redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
    --dir "$DIR" --pidfile "$DIR/redis.pid" --logfile "$DIR/redis.log"
  STOPS+=("redis-cli -p $port shutdown nosave")
  wait_for redis-cli -p "$port" ping
  export TEST_REDIS="redis://127.0.0.1:$port"
  echo "test services: Redis on $port" >&2
fi

if [ -z "${TEST_AMQP:-}" ]; then
  port=$(free_port)
  # Its own node, data, plugins and config file: the machine's RabbitMQ (and its config, which
  # names port 5672) is neither used nor touched. epmd is shared, as Erlang nodes share it.
  export RABBITMQ_NODENAME="reset-delivery-test-$port@localhost" RABBITMQ_DIST_PORT=$(free_port)
  export RABBITMQ_MNESIA_BASE="$DIR/rabbitmq/mnesia" RABBITMQ_LOG_BASE="$DIR/rabbitmq/log"
  export RABBITMQ_ENABLED_PLUGINS_FILE="$DIR/rabbitmq/enabled_plugins" RABBITMQ_PID_FILE="$DIR/rabbitmq/pid"
  export RABBITMQ_CONFIG_FILE="$DIR/rabbitmq/rabbitmq.conf"
  mkdir -p "$DIR/rabbitmq/mnesia" "$DIR/rabbitmq/log"
  echo "[]." >"$RABBITMQ_ENABLED_PLUGINS_FILE"
  echo "listeners.tcp.local = 127.0.0.1:$port" >"$RABBITMQ_CONFIG_FILE"
  own rabbitmq "$DIR/rabbitmq"
  rabbitmq-server -detached
  STOPS+=("rabbitmqctl -n $RABBITMQ_NODENAME stop")
  wait_for rabbitmqctl -n "$RABBITMQ_NODENAME" await_startup --timeout 2
  export TEST_AMQP="amqp://guest:guest@127.0.0.1:$port//" TEST_RABBITMQ_NODE=$RABBITMQ_NODENAME
  echo "test services: RabbitMQ on $port" >&2
fi

"$@"
