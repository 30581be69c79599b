#!/usr/bin/env bash
# Our own Redis: scripts/redis.sh start|stop DATA PORT
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=redis

[[ $# -eq 3 ]] || die "usage: $0 start|stop DATA PORT"
action="$1"
data="$(abs "$2")"
port="$3"

ping() { [[ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" == PONG ]]; }

start() {
	need_packages redis-server:redis-server redis-cli:redis-tools
	local pid
	if pid="$(our_pid "$data" redis redis-server)"; then
		wait_for "redis on 127.0.0.1:$port" "$START_TIMEOUT" "$pid" "$(log_file "$data" redis)" ping
		log "already running (pid $pid, 127.0.0.1:$port)"
		return 0
	fi
	if ping; then
		log "127.0.0.1:$port already answers and is not ours: reusing it, will not stop it"
		return 0
	fi
	mkdir -p "$data/redis" "$data/pids" "$data/logs"
	local pf logf
	pf="$(pid_file "$data" redis)"
	logf="$(log_file "$data" redis)"
	rm -f "$pf"
	log "starting on 127.0.0.1:$port, data $data/redis"
	# Redis daemonizes itself and writes the daemon's pid to the pid file.
	redis-server --port "$port" --bind 127.0.0.1 --dir "$data/redis" \
		--appendonly yes --appendfsync everysec --maxmemory-policy noeviction --save '' \
		--daemonize yes --pidfile "$pf" --logfile "$logf" ||
		{
			show_log "$logf"
			die "redis-server failed to start"
		}
	wait_for "redis pid file" "$START_TIMEOUT" "" "$logf" test -s "$pf"
	pid="$(tr -d '[:space:]' <"$pf")"
	wait_for "redis on 127.0.0.1:$port" "$START_TIMEOUT" "$pid" "$logf" ping
	log "ready (pid $pid)"
}

case "$action" in
start) start ;;
stop) stop_pid "$data" redis redis-server ;;
*) die "usage: $0 start|stop DATA PORT" ;;
esac
