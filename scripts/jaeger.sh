#!/usr/bin/env bash
# Our own Jaeger (jaeger-dev/go.mod pins it; built once into .data/bin/jaeger):
#   scripts/jaeger.sh start|background|stop|build DATA
# background starts it at once when built, else builds and starts it in a
# detached process (`up` does not wait; the OTLP exporters retry until the
# collector answers, so traces flow once it does).
# JAEGER_OTLP_ADDR (127.0.0.1:4318) receives OTLP/HTTP; JAEGER_QUERY_ADDR
# (127.0.0.1:16686) serves the query API (/api/services, /api/traces) and
# the UI. A plain `go build` embeds a placeholder instead of Jaeger's web UI
# (its assets are built with npm upstream): the query API works, the page
# at / only says the UI was not built.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=jaeger

[[ $# -eq 2 ]] || die "usage: $0 start|background|stop|build DATA"
action="$1"
data="$(abs "$2")"
bin="$ROOT/.data/bin/jaeger"
export JAEGER_OTLP_ADDR="${JAEGER_OTLP_ADDR:-127.0.0.1:4318}"
export JAEGER_QUERY_ADDR="${JAEGER_QUERY_ADDR:-127.0.0.1:16686}"
export JAEGER_QUERY_GRPC_ADDR="${JAEGER_QUERY_GRPC_ADDR:-127.0.0.1:16685}"

ready() { [[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://$JAEGER_QUERY_ADDR/api/services")" == 200 ]]; }

build() { build_tool "$bin" "$ROOT/jaeger-dev" github.com/jaegertracing/jaeger/cmd/jaeger; }

start() {
	need_packages curl:curl
	local pid
	if pid="$(our_pid "$data" jaeger "jaeger --config")"; then
		log "already running (pid $pid, http://$JAEGER_QUERY_ADDR)"
		return 0
	fi
	if ready; then
		log "http://$JAEGER_QUERY_ADDR already answers and is not ours: reusing it, will not stop it"
		return 0
	fi
	build
	mkdir -p "$data/pids" "$data/logs"
	local logf
	logf="$(log_file "$data" jaeger)"
	log "starting: OTLP/HTTP on $JAEGER_OTLP_ADDR, query on http://$JAEGER_QUERY_ADDR"
	setsid nohup "$bin" --config "$ROOT/jaeger-dev/config.yaml" >>"$logf" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$(pid_file "$data" jaeger)"
	wait_for "jaeger query on http://$JAEGER_QUERY_ADDR" "$START_TIMEOUT" "$pid" "$logf" ready
	log "ready (pid $pid)"
}

background() {
	if [[ -x "$bin" ]]; then
		start
		return 0
	fi
	in_background "$data" jaeger-build "not built yet: building and starting it in the background; traces flow once it answers" \
		"$0" start "$data"
}

case "$action" in
start) start ;;
background) background ;;
stop)
	stop_background "$data" jaeger-build "jaeger.sh start"
	stop_pid "$data" jaeger "jaeger --config"
	;;
build) build ;;
*) die "usage: $0 start|background|stop|build DATA" ;;
esac
