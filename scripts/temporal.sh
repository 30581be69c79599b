#!/usr/bin/env bash
# Our own Temporal dev server:
#   scripts/temporal.sh start|background|stop DATA PORT UIPORT [--headless]
# (the same as `go tool -modfile=temporal-dev/go.mod temporal server start-dev ...`,
# but run as a built binary so the pid file holds the server's pid).
# background starts it at once when built, else builds (minutes, the first
# time) and starts it in a detached process: the API and worker start
# without Temporal and connect when it answers.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=temporal

[[ $# -ge 4 ]] || die "usage: $0 start|background|stop DATA PORT UIPORT [--headless]"
action="$1"
data="$(abs "$2")"
port="$3"
uiport="$4"
headless="${5:-}"
bin="$SECKILL_TEMPORAL_BIN"

healthy() {
	[[ "$("$bin" operator cluster health --address "127.0.0.1:$port" --command-timeout 3s 2>/dev/null)" == SERVING ]] || return 1
	# The workflows need these search attributes registered.
	local attrs
	attrs="$("$bin" operator search-attribute list --address "127.0.0.1:$port" --command-timeout 3s 2>/dev/null)" || return 1
	local a
	for a in SaleId UserId OrderStatus; do
		grep -qw "$a" <<<"$attrs" || return 1
	done
}

build() { build_tool "$bin" "$ROOT/temporal-dev" github.com/temporalio/cli/cmd/temporal; }

start() {
	build
	local pid logf pf
	logf="$(log_file "$data" temporal)"
	pf="$(pid_file "$data" temporal)"
	if pid="$(our_pid "$data" temporal "server start-dev")"; then
		wait_for "temporal on 127.0.0.1:$port" "$START_TIMEOUT" "$pid" "$logf" healthy
		log "already running (pid $pid, 127.0.0.1:$port)"
		return 0
	fi
	if healthy; then
		log "127.0.0.1:$port already answers and is not ours: reusing it, will not stop it"
		return 0
	fi
	mkdir -p "$data/temporal" "$data/pids" "$data/logs"
	# The same settings as internal/testkit/devtemporal (the chaos and fault tests'
	# servers), which says why search attributes are read from the cache.
	local args=(server start-dev --ip 127.0.0.1 --port "$port" --ui-port "$uiport"
		--db-filename "$data/temporal/temporal.db"
		--sqlite-pragma journal_mode=WAL --sqlite-pragma synchronous=NORMAL
		--search-attribute SaleId=Int --search-attribute UserId=Int --search-attribute OrderStatus=Keyword
		--dynamic-config-value system.forceSearchAttributesCacheRefreshOnRead=false
		--log-level warn)
	[[ "$headless" != --headless ]] || args+=(--headless)
	local ui="UI http://127.0.0.1:$uiport"
	[[ "$headless" != --headless ]] || ui="headless"
	log "starting on 127.0.0.1:$port ($ui), data $data/temporal"
	# Own session: a Ctrl-C in the terminal must not reach it; we stop it by pid.
	setsid nohup "$bin" "${args[@]}" >>"$logf" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$pf"
	wait_for "temporal on 127.0.0.1:$port" "$START_TIMEOUT" "$pid" "$logf" healthy
	log "ready (pid $pid)"
}

background() {
	if [[ -x "$bin" ]]; then
		start
		return 0
	fi
	in_background "$data" temporal-build "not built yet: building and starting it in the background; the worker joins it when it answers" \
		"$0" start "$data" "$port" "$uiport" "$headless"
}

case "$action" in
start) start ;;
background) background ;;
stop)
	stop_background "$data" temporal-build "temporal.sh start"
	stop_pid "$data" temporal "server start-dev"
	;;
*) die "usage: $0 start|background|stop DATA PORT UIPORT [--headless]" ;;
esac
