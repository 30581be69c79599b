#!/usr/bin/env bash
# `go tool task up`: the whole system on this machine, in development mode.
# Safe to run again: what already runs is left alone.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=up
cd "$ROOT"
export SECKILL_ENV="${SECKILL_ENV:-dev}"

# SECKILL_REDIS=sentinel: a Sentinel group (master, replica, three
# sentinels; scripts/redis.sh) instead of one Redis, reached through
# REDIS_SENTINELS like a production Sentinel deployment.
redis_packages=(redis-server:redis-server redis-cli:redis-tools)
case "${SECKILL_REDIS:=single}" in
single) ;;
sentinel)
	for v in REDIS_ADDR REDIS_ADDRS REDIS_URL REDIS_SENTINELS REDIS_SENTINEL_MASTER; do
		[[ -z "${!v:-}" ]] || die "SECKILL_REDIS=sentinel runs a Sentinel group of its own: unset $v"
	done
	redis_packages+=(redis-sentinel:redis-sentinel)
	;;
*) die "SECKILL_REDIS: single or sentinel, not $SECKILL_REDIS" ;;
esac
export SECKILL_REDIS
# SECKILL_DB=galera: a three-node Galera cluster behind HAProxy
# (scripts/galera.sh) instead of one MariaDB, reached at HAProxy's one
# address like a managed service's endpoint.
case "${SECKILL_DB:=single}" in
single) ;;
galera) [[ -z "${MYSQL_DSN:-}" ]] || die "SECKILL_DB=galera runs a cluster of its own: unset MYSQL_DSN" ;;
*) die "SECKILL_DB: single or galera, not $SECKILL_DB" ;;
esac
export SECKILL_DB
need_packages "${redis_packages[@]}" mariadbd:mariadb-server mariadb:mariadb-client curl:curl
# bin/seckill compiles while the services start: neither waits for the
# other.
log "building bin/seckill alongside the services"
go build -buildvcs=auto -ldflags "$("$ROOT/scripts/ldflags.sh")" -o bin/seckill ./cmd/seckill & # stamps the commit (scripts/ldflags.sh)
build_pid=$!
# A Temporal CLI not built yet is built after bin/seckill, in the
# background: the API and worker start without Temporal (reservations are
# taken and wait in the sale's inbox) and connect when it answers.
SECKILL_TEMPORAL_LATER=1 "$ROOT/scripts/services.sh" up dev
wait "$build_pid" || die "building bin/seckill failed"
redis_line="Redis ${REDIS_ADDRS:-${REDIS_ADDR:-127.0.0.1:6379}}"
[[ -z "${REDIS_SENTINELS:-}" ]] || redis_line="Redis through the sentinels $REDIS_SENTINELS"
if [[ "$SECKILL_REDIS" == sentinel ]]; then
	# The API and the worker ask the sentinels for the master.
	export REDIS_SENTINELS REDIS_SENTINEL_MASTER="$SENTINEL_MASTER"
	REDIS_SENTINELS="$(sentinel_addrs 6379)"
	redis_line="Redis master \"$SENTINEL_MASTER\" through the sentinels $REDIS_SENTINELS (first master 127.0.0.1:6379, replica 127.0.0.1:6380; logs .data/logs/redis*.log)"
fi
if [[ -z "${TEMPORAL_ADDRESS:-}" && "${SECKILL_TEMPORAL:-dev}" == dev ]]; then
	"$ROOT/scripts/temporal.sh" background "$ROOT/.data" 7233 8233 # at once when built (then already running)
fi
log "applying migrations"
bin/seckill migrate
# Traces go to a local Jaeger unless OTEL_EXPORTER_OTLP_ENDPOINT names
# another collector.
jaeger_line="traces to ${OTEL_EXPORTER_OTLP_ENDPOINT:-} (set by you)"
if [[ -z "${OTEL_EXPORTER_OTLP_ENDPOINT:-}" ]]; then
	# Built once from source (minutes): never on the critical path.
	jaeger_note=""
	[[ -x "$ROOT/.data/bin/jaeger" ]] || jaeger_note="   (building in the background, .data/logs/jaeger-build.log; traces flow once it answers)"
	"$ROOT/scripts/jaeger.sh" background "$ROOT/.data"
	export OTEL_EXPORTER_OTLP_ENDPOINT="http://${JAEGER_OTLP_ADDR:-127.0.0.1:4318}"
	# Locally every admitted request is traced (production's default is 0.1).
	export OTEL_TRACES_SAMPLER_ARG="${OTEL_TRACES_SAMPLER_ARG:-1}"
	jaeger_line="http://${JAEGER_QUERY_ADDR:-127.0.0.1:16686}   (query API: /api/traces?service=seckill-api)$jaeger_note"
fi
"$ROOT/scripts/app.sh" start worker
"$ROOT/scripts/app.sh" start api
prom_addr="${PROMETHEUS_ADDR:-127.0.0.1:9090}"
"$ROOT/scripts/prometheus.sh" start "$ROOT/.data" "$prom_addr"

ui_line="http://127.0.0.1:8233"
if our_pid "$ROOT/.data" temporal-build "temporal.sh start" >/dev/null; then
	ui_line="$ui_line   (building in the background, .data/logs/temporal-build.log: minutes the first time; reservations queue until it answers)"
fi
if [[ "${SECKILL_TEMPORAL:-dev}" == server ]]; then
	ui_line="http://127.0.0.1:8233   (the production-shaped server: PostgreSQL, ${SECKILL_TEMPORAL_SHARDS:-8} shards; log .data/logs/temporal-server.log)"
fi
db_note=""
[[ "$SECKILL_DB" != galera ]] || db_note="   (HAProxy in front of a Galera cluster: nodes 127.0.0.1:3307-3309, logs .data/logs/galera-*.log)"
api_addr="${API_ADDR:-127.0.0.1:8080}"
sale_id="$(bin/seckill demo --api "http://$api_addr" --id-file "$ROOT/.data/demo-sale-id")"

cat <<INFO

seckill is running (development mode; \`go tool task down\` stops it).
  API          http://$api_addr        (log .data/logs/api.log)
  worker       metrics http://${WORKER_METRICS_ADDR:-127.0.0.1:9091}/metrics  (log .data/logs/worker.log)
  Temporal UI  $ui_line
  Jaeger       $jaeger_line
  Prometheus   http://$prom_addr   (alert rules loaded: http://$prom_addr/alerts)
  $redis_line
  MariaDB ${MYSQL_DSN:-root@tcp(127.0.0.1:3306)/seckill}$db_note, Temporal ${TEMPORAL_ADDRESS:-127.0.0.1:7233}
  demo sale    $sale_id

Try it:
  TOKEN=\$(SECKILL_ENV=dev bin/seckill token --user 42)
  curl -s http://$api_addr/api/v1/sales/$sale_id
  curl -s -X POST http://$api_addr/api/v1/sales/$sale_id/reservations \\
    -H "Authorization: Bearer \$TOKEN" -H 'Content-Type: application/json' \\
    -d '{"request_id":"try-'\$RANDOM'-0001"}'
  curl -s "http://$api_addr/api/v1/me/reservations?sale_id=$sale_id" -H "Authorization: Bearer \$TOKEN"
An admin token: SECKILL_ENV=dev bin/seckill token --user 1 --admin
INFO
