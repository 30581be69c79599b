#!/usr/bin/env bash
# The production-shaped Temporal: go.temporal.io/server (pinned in
# temporal-server/go.mod) on our own PostgreSQL, with SQL visibility and
# SECKILL_TEMPORAL_SHARDS history shards (8 by default).
#   scripts/temporal-server.sh start|stop DATA PORT
# (start is prepare, run in the background, register; a supervisor runs
# the three itself.)
# PORT is the frontend's gRPC port; the history, matching and worker
# services take PORT+1..3, the HTTP API PORT+10, membership PORT+100..103,
# metrics PORT+20, PostgreSQL SECKILL_POSTGRES_PORT (PORT-1800).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=temporal-server

[[ $# -eq 3 ]] || die "usage: $0 start|stop|prepare|run|register DATA PORT"
action="$1"
data="$(abs "$2")"
port="$3"
pg_port="${SECKILL_POSTGRES_PORT:-$((port - 1800))}"
shards="${SECKILL_TEMPORAL_SHARDS:-8}"
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || die "SECKILL_TEMPORAL_SHARDS: a positive number, not $shards"
# The shard count is fixed when a database is created: one database per count.
db="temporal_s$shards"
bin="$ROOT/.data/bin/temporal-server"
sqltool="$ROOT/.data/bin/temporal-sql-tool"
cli="$SECKILL_TEMPORAL_BIN"

build() {
	build_tool "$bin" "$ROOT/temporal-server" go.temporal.io/server/cmd/server
	build_tool "$sqltool" "$ROOT/temporal-server" go.temporal.io/server/cmd/tools/sql
	build_tool "$cli" "$ROOT/temporal-dev" github.com/temporalio/cli/cmd/temporal
}

sql_tool() { "$sqltool" --plugin postgres12 --endpoint 127.0.0.1 --port "$pg_port" --user temporal "$@"; }

# schema creates the two databases once and brings their schemas to the
# server's version (update-schema is idempotent).
schema() {
	local name dir
	for name in "$db" "${db}_visibility"; do
		dir=postgresql/v12/temporal
		[[ "$name" != *_visibility ]] || dir=postgresql/v12/visibility
		if [[ -z "$(psql -h 127.0.0.1 -p "$pg_port" -U temporal -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$name'")" ]]; then
			log "creating database $name"
			sql_tool --database "$name" create-database >>"$logf" 2>&1 || die "create database $name failed"
			sql_tool --database "$name" setup-schema -v 0.0 >>"$logf" 2>&1 || die "setup schema of $name failed"
		fi
		sql_tool --database "$name" update-schema --schema-name "$dir" >>"$logf" 2>&1 || die "update schema of $name failed"
	done
}

serving() { [[ "$("$cli" operator cluster health --address "127.0.0.1:$port" --command-timeout 3s 2>/dev/null)" == SERVING ]]; }

# healthy: serving, with the namespace and the search attributes the
# workflows need.
healthy() {
	serving || return 1
	local attrs a
	attrs="$("$cli" operator search-attribute list --address "127.0.0.1:$port" --command-timeout 3s 2>/dev/null)" || return 1
	for a in SaleId UserId OrderStatus; do
		grep -qw "$a" <<<"$attrs" || return 1
	done
}

# namespace registers the default namespace and the search attributes.
namespace() {
	local t=(--address "127.0.0.1:$port" --command-timeout 10s)
	if ! "$cli" operator namespace describe --namespace default "${t[@]}" >/dev/null 2>&1; then
		log "registering namespace default (retention 72h)"
		"$cli" operator namespace create --namespace default --retention 72h "${t[@]}" >>"$logf" 2>&1 ||
			die "cannot register namespace default"
	fi
	# A new namespace reaches the frontend's cache within seconds.
	listed() { attrs="$("$cli" operator search-attribute list --namespace default --address "127.0.0.1:$port" --command-timeout 5s 2>/dev/null)"; }
	local attrs
	wait_for "namespace default on 127.0.0.1:$port" "$START_TIMEOUT" "" "$logf" listed
	listed || die "cannot list search attributes"
	grep -qw SaleId <<<"$attrs" || "$cli" operator search-attribute create --namespace default "${t[@]}" \
		--name SaleId --type Int --name UserId --type Int --name OrderStatus --type Keyword >>"$logf" 2>&1 ||
		die "cannot create the search attributes"
}

# prepare: the binaries, PostgreSQL and the schemas.
prepare() {
	build
	mkdir -p "$data/pids" "$data/logs"
	"$ROOT/scripts/postgres.sh" start "$data" "$pg_port"
	schema
}

# run: the server in the foreground, in place of this script (a supervisor
# such as the chaos run keeps its pid).
run() {
	export TS_PORT="$port" TS_PG_PORT="$pg_port" TS_SHARDS="$shards" TS_DB="$db" TS_METRICS_PORT="$((port + 20))"
	export TS_DYNAMIC_CONFIG="$ROOT/temporal-server/dynamicconfig.yaml"
	exec "$bin" --config-file "$ROOT/temporal-server/config.yaml" --allow-no-auth start
}

# register: the namespace and search attributes of a serving server.
register() {
	wait_for "temporal-server on 127.0.0.1:$port" "$START_TIMEOUT" "" "$logf" serving
	namespace
	wait_for "temporal-server's namespace on 127.0.0.1:$port" "$START_TIMEOUT" "" "$logf" healthy
}

start() {
	local pid pf
	pf="$(pid_file "$data" temporal-server)"
	if pid="$(our_pid "$data" temporal-server "temporal-server")"; then
		register
		log "already running (pid $pid, 127.0.0.1:$port)"
		return 0
	fi
	prepare
	log "starting on 127.0.0.1:$port ($shards history shards, PostgreSQL 127.0.0.1:$pg_port, database $db)"
	setsid nohup "$0" run "$data" "$port" >>"$logf" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$pf"
	wait_for "temporal-server on 127.0.0.1:$port" "$START_TIMEOUT" "$pid" "$logf" serving
	register
	log "ready (pid $pid)"
}

stop() {
	stop_pid "$data" temporal-server "temporal-server"
	"$ROOT/scripts/postgres.sh" stop "$data" "$pg_port"
}

logf="$(log_file "$data" temporal-server)"
case "$action" in
start) start ;;
stop) stop ;;
prepare) prepare ;;
run) run ;;
register) register ;;
*) die "usage: $0 start|stop|prepare|run|register DATA PORT" ;;
esac
