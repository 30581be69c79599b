#!/usr/bin/env bash
# The Temporal UI for the production-shaped server:
#   scripts/temporal-ui.sh start|stop DATA PORT UIPORT
# github.com/temporalio/ui-server/v2, pinned in temporal-ui/go.mod, asks for
# Go 1.26.10; the one newer Go these machines can fetch is go1.27.3 (through
# the module proxy), so this script alone builds with GOTOOLCHAIN=go1.27.3,
# once, into .data/bin/temporal-ui. PORT is the server's frontend.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=temporal-ui

[[ $# -eq 4 ]] || die "usage: $0 start|stop DATA PORT UIPORT"
action="$1"
data="$(abs "$2")"
port="$3"
uiport="$4"
bin="$ROOT/.data/bin/temporal-ui"

answers() { curl -fsS -o /dev/null --max-time 3 "http://127.0.0.1:$uiport/"; }

start() {
	need_packages curl:curl
	build_tool "$bin" "$ROOT/temporal-ui" github.com/temporalio/ui-server/v2/cmd/server GOTOOLCHAIN=go1.27.3
	local pid logf pf
	logf="$(log_file "$data" temporal-ui)"
	pf="$(pid_file "$data" temporal-ui)"
	mkdir -p "$data/pids" "$data/logs"
	if pid="$(our_pid "$data" temporal-ui "temporal-ui")"; then
		wait_for "temporal-ui on 127.0.0.1:$uiport" "$START_TIMEOUT" "$pid" "$logf" answers
		log "already running (pid $pid, http://127.0.0.1:$uiport)"
		return 0
	fi
	log "starting on http://127.0.0.1:$uiport for the server on 127.0.0.1:$port"
	TS_PORT="$port" TS_UI_PORT="$uiport" setsid nohup "$bin" --root "$ROOT/temporal-ui" --config config --env seckill start \
		>>"$logf" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$pf"
	wait_for "temporal-ui on 127.0.0.1:$uiport" "$START_TIMEOUT" "$pid" "$logf" answers
	log "ready (pid $pid)"
}

case "$action" in
start) start ;;
stop) stop_pid "$data" temporal-ui "temporal-ui" ;;
*) die "usage: $0 start|stop DATA PORT UIPORT" ;;
esac
