#!/usr/bin/env bash
# Redis, MariaDB and Temporal of a profile: scripts/services.sh up|down dev|test
#   dev:  .data/       Redis 6379,  MariaDB 3306 (seckill),       Temporal 7233, UI 8233
#   test: .data/test/  Redis 16379, MariaDB 13306 (seckill_test), Temporal 17233, headless
# For dev, REDIS_ADDR(S) (or REDIS_SENTINELS), MYSQL_DSN or TEMPORAL_ADDRESS
# point at servers of your own; we then start none of that kind.
# SECKILL_REDIS=sentinel runs a Sentinel group for dev instead of one Redis
# (scripts/redis.sh: master 6379, replica 6380, sentinels 26379-26381);
# SECKILL_DB=galera runs a three-node Galera cluster behind HAProxy for dev
# instead of one MariaDB (scripts/galera.sh: HAProxy on 3306, nodes
# 3307-3309);
# SECKILL_TEMPORAL=server runs the production-shaped Temporal
# (scripts/temporal-server.sh: PostgreSQL, SQL visibility, 8 history
# shards) on the same port instead of the dev server.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=services

[[ $# -eq 2 ]] || die "usage: $0 up|down dev|test"
action="$1"
profile="$2"
here="$ROOT/scripts"

case "$profile" in
dev)
	data="$ROOT/.data" redis_port=6379 mysql_port=3306 db=seckill temporal_port=7233 ui_port=8233 headless=""
	;;
test)
	# The ports can move (SECKILL_TEST_*_PORT), e.g. to try a cold start
	# while the usual test ports are served.
	data="$(abs "${SECKILL_TEST_DATA:-.data/test}")"
	redis_port="${SECKILL_TEST_REDIS_PORT:-16379}" mysql_port="${SECKILL_TEST_MYSQL_PORT:-13306}"
	temporal_port="${SECKILL_TEST_TEMPORAL_PORT:-17233}" ui_port=$((temporal_port + 1000))
	db=seckill_test headless=--headless
	;;
*) die "unknown profile $profile (dev or test)" ;;
esac

up() {
	local names=() pids=()
	if [[ "$profile" == dev && "${SECKILL_REDIS:-single}" == sentinel ]]; then
		"$here/redis.sh" start "$data" "$redis_port" sentinel &
		names+=(redis) pids+=($!)
	elif [[ "$profile" == dev && -n "${REDIS_ADDR:-}${REDIS_ADDRS:-}${REDIS_SENTINELS:-}" ]]; then
		log "REDIS_ADDR(S) or REDIS_SENTINELS is set: using ${REDIS_SENTINELS:-${REDIS_ADDRS:-${REDIS_ADDR:-}}}, not starting Redis"
	else
		"$here/redis.sh" start "$data" "$redis_port" &
		names+=(redis) pids+=($!)
	fi
	if [[ "$profile" == dev && -n "${MYSQL_DSN:-}" ]]; then
		log "MYSQL_DSN is set: using it, not starting MariaDB"
	elif [[ "$profile" == dev && "${SECKILL_DB:-single}" == galera ]]; then
		"$here/galera.sh" start "$data" "$mysql_port" "$db" &
		names+=(mariadb) pids+=($!)
	else
		"$here/mariadb.sh" start "$data" "$mysql_port" "$db" &
		names+=(mariadb) pids+=($!)
	fi
	if [[ "$profile" == dev && -n "${TEMPORAL_ADDRESS:-}" ]]; then
		log "TEMPORAL_ADDRESS is set: using $TEMPORAL_ADDRESS, not starting Temporal"
	elif [[ "$profile" == dev && "${SECKILL_TEMPORAL:-dev}" == dev && -n "${SECKILL_TEMPORAL_LATER:-}" && ! -x "$SECKILL_TEMPORAL_BIN" ]]; then
		# up's choice: a first build of the CLI must not hold up the rest.
		log "the Temporal CLI is not built yet: the caller builds and starts it later"
	else
		case "${SECKILL_TEMPORAL:-dev}" in
		dev) "$here/temporal.sh" start "$data" "$temporal_port" "$ui_port" $headless & ;;
		server)
			# The server, then (not headless) its UI on the dev server's UI port.
			(
				"$here/temporal-server.sh" start "$data" "$temporal_port"
				[[ -n "$headless" ]] || "$here/temporal-ui.sh" start "$data" "$temporal_port" "$ui_port"
			) &
			;;
		*) die "SECKILL_TEMPORAL: dev or server, not ${SECKILL_TEMPORAL}" ;;
		esac
		names+=(temporal) pids+=($!)
	fi
	# The three start in parallel; any failure fails the whole.
	local i failed=()
	for i in "${!pids[@]}"; do
		wait "${pids[$i]}" || failed+=("${names[$i]}")
	done
	((${#failed[@]} == 0)) || die "failed to start: ${failed[*]}"
	log "$profile services ready under $data"
}

down() {
	"$here/temporal.sh" stop "$data" "$temporal_port" "$ui_port"
	"$here/temporal-ui.sh" stop "$data" "$temporal_port" "$ui_port"
	"$here/temporal-server.sh" stop "$data" "$temporal_port"
	"$here/mariadb.sh" stop "$data" "$mysql_port"
	"$here/galera.sh" stop "$data" "$mysql_port"
	"$here/redis.sh" stop "$data" "$redis_port"
}

case "$action" in
up) up ;;
down) down ;;
*) die "usage: $0 up|down dev|test" ;;
esac
