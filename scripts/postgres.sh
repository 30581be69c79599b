#!/usr/bin/env bash
# Our own PostgreSQL for the production-shaped Temporal:
# scripts/postgres.sh start|stop DATA PORT
# PostgreSQL refuses to run as root: the cluster runs as the package's
# postgres user, with trust authentication on 127.0.0.1 only.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=postgres

[[ $# -eq 3 ]] || die "usage: $0 start|stop DATA PORT"
action="$1"
data="$(abs "$2")"
port="$3"

answers() { psql -h 127.0.0.1 -p "$port" -U temporal -d postgres -tAc 'select 1' >/dev/null; }

# As root, the server's commands run as postgres (setpriv execs, so the
# pid we keep is the server's own).
as_postgres=()
((EUID != 0)) || as_postgres=(setpriv --reuid=postgres --regid=postgres --init-groups)

start() {
	need_packages psql:postgresql-client pg_ctlcluster:postgresql
	local bindir
	bindir="$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d | sort -V | tail -1)"
	[[ -x "$bindir/postgres" ]] || die "no PostgreSQL server under /usr/lib/postgresql"
	local pid
	if pid="$(our_pid "$data" postgres "$bindir/postgres")"; then
		wait_for "postgres on 127.0.0.1:$port" "$START_TIMEOUT" "$pid" "$(log_file "$data" postgres)" answers
		log "already running (pid $pid, 127.0.0.1:$port)"
		return 0
	fi
	local datadir="$data/postgres" logf pf
	logf="$(log_file "$data" postgres)"
	pf="$(pid_file "$data" postgres)"
	mkdir -p "$data/pids" "$data/logs"
	touch "$logf"
	if ((EUID == 0)) && ! "${as_postgres[@]}" test -x "$data"; then
		die "the postgres user cannot reach $data: every directory above it must be searchable by others (chmod o+x)"
	fi
	if [[ ! -f "$datadir/PG_VERSION" ]]; then
		log "initialising $datadir"
		mkdir -p "$datadir"
		((EUID != 0)) || chown postgres:postgres "$datadir" "$logf"
		"${as_postgres[@]}" "$bindir/initdb" -D "$datadir" -U temporal --auth=trust -E UTF8 >>"$logf" 2>&1 ||
			{
				show_log "$logf"
				die "initdb failed"
			}
	fi
	((EUID != 0)) || chown postgres:postgres "$logf"
	log "starting on 127.0.0.1:$port, data $datadir"
	# No Unix socket (TCP on 127.0.0.1 only); enough connections for the
	# Temporal services' pools. Own session, stopped by pid.
	setsid nohup "${as_postgres[@]}" "$bindir/postgres" -D "$datadir" -p "$port" \
		-c listen_addresses=127.0.0.1 -c unix_socket_directories= -c max_connections=300 \
		-c shared_buffers=256MB \
		>>"$logf" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$pf"
	wait_for "postgres on 127.0.0.1:$port" "$START_TIMEOUT" "$pid" "$logf" answers
	log "ready (pid $pid)"
}

case "$action" in
start) start ;;
stop)
	# SIGINT is PostgreSQL's fast shutdown (SIGTERM waits for every client).
	if pid="$(our_pid "$data" postgres "postgres -D")"; then kill -INT "$pid" 2>/dev/null || true; fi
	stop_pid "$data" postgres "postgres -D"
	;;
*) die "usage: $0 start|stop DATA PORT" ;;
esac
