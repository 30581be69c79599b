#!/usr/bin/env bash
# Our own Prometheus (Debian's package) scraping the API and the worker with
# the alert rules loaded: scripts/prometheus.sh start|stop DATA ADDR
# API_ADDR and WORKER_METRICS_ADDR name the targets (defaults as in up).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=prometheus

[[ $# -eq 3 ]] || die "usage: $0 start|stop DATA ADDR"
action="$1"
data="$(abs "$2")"
addr="$3"

ready() { [[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://$addr/-/ready")" == 200 ]]; }

start() {
	need_packages prometheus:prometheus promtool:prometheus curl:curl
	local pid
	if pid="$(our_pid "$data" prometheus "prometheus --config.file")"; then
		log "already running (pid $pid, http://$addr)"
		return 0
	fi
	if ready; then
		log "http://$addr already answers and is not ours: reusing it, will not stop it"
		return 0
	fi
	mkdir -p "$data/prometheus" "$data/pids" "$data/logs"
	local conf="$data/prometheus/prometheus.yml" logf
	logf="$(log_file "$data" prometheus)"
	# The committed config with this run's targets and the rules' full path.
	sed -e "s|\"127.0.0.1:8080\"|\"${API_ADDR:-127.0.0.1:8080}\"|" \
		-e "s|\"127.0.0.1:9091\"|\"${WORKER_METRICS_ADDR:-127.0.0.1:9091}\"|" \
		-e "s|^  - alerts.yml|  - $ROOT/deploy/prometheus/alerts.yml|" \
		"$ROOT/deploy/prometheus/prometheus.yml" >"$conf"
	promtool check config "$conf" >/dev/null || die "promtool rejects $conf"
	log "starting on http://$addr (config $conf)"
	setsid nohup prometheus --config.file "$conf" --storage.tsdb.path "$data/prometheus/tsdb" \
		--web.listen-address "$addr" >>"$logf" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$(pid_file "$data" prometheus)"
	wait_for "prometheus on http://$addr" "$START_TIMEOUT" "$pid" "$logf" ready
	log "ready (pid $pid)"
}

case "$action" in
start) start ;;
stop) stop_pid "$data" prometheus "prometheus --config.file" ;;
*) die "usage: $0 start|stop DATA ADDR" ;;
esac
