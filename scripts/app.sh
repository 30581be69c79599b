#!/usr/bin/env bash
# Our API or worker process: scripts/app.sh start|stop api|worker
# Runs bin/seckill in development mode under .data/ (log .data/logs/NAME.log,
# pid .data/pids/NAME.pid). Environment variables pass through, so
# REDIS_ADDR, MYSQL_DSN, TEMPORAL_ADDRESS etc. apply.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $# -eq 2 ]] || die "usage: $0 start|stop api|worker"
action="$1"
name="$2"
LOG_TAG="$name"
data="$ROOT/.data"
bin="$ROOT/bin/seckill"
pattern="seckill $name"
api_addr="${API_ADDR:-127.0.0.1:8080}"
metrics_addr="${WORKER_METRICS_ADDR:-127.0.0.1:9091}"

start() {
	[[ "$name" == api || "$name" == worker ]] || die "unknown process $name"
	[[ -x "$bin" ]] || die "$bin is missing: build it first"
	need_packages curl:curl
	local pid logf
	logf="$(log_file "$data" "$name")"
	if pid="$(our_pid "$data" "$name" "$pattern")"; then
		log "already running (pid $pid); \`go tool task down\` first to restart it"
		return 0
	fi
	mkdir -p "$data/pids" "$data/logs"
	log "starting $bin $name (log $logf)"
	# A marker, so a failure's log tail shows where this run begins.
	echo "--- $(date -u +%FT%TZ) starting seckill $name" >>"$logf"
	# Own session: a Ctrl-C in the terminal must not reach it; we stop it by pid.
	SECKILL_ENV="${SECKILL_ENV:-dev}" setsid nohup "$bin" "$name" >>"$logf" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$(pid_file "$data" "$name")"
	if [[ "$name" == api ]]; then
		wait_for "api health at http://$api_addr/healthz" "$START_TIMEOUT" "$pid" "$logf" http_ok "http://$api_addr/healthz"
		log "ready (pid $pid, http://$api_addr)"
		return 0
	fi
	# The worker has no health endpoint; its metrics listener answering
	# means it got through its start-up.
	wait_for "worker metrics at http://$metrics_addr/metrics" "$START_TIMEOUT" "$pid" "$logf" http_ok "http://$metrics_addr/metrics"
	log "ready (pid $pid, metrics http://$metrics_addr/metrics)"
}

case "$action" in
start) start ;;
stop) stop_pid "$data" "$name" "$pattern" ;;
*) die "usage: $0 start|stop api|worker" ;;
esac
