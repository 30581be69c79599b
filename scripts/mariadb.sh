#!/usr/bin/env bash
# Our own MariaDB: scripts/mariadb.sh start|stop DATA PORT [DATABASE]
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=mariadb

[[ $# -ge 3 ]] || die "usage: $0 start|stop DATA PORT [DATABASE]"
action="$1"
data="$(abs "$2")"
port="$3"
database="${4:-seckill}"

sql() { mariadb -h127.0.0.1 -P"$port" -uroot --connect-timeout=3 "$@"; }
answers() { sql -e 'select 1'; }

create_db() {
	[[ "$database" =~ ^[A-Za-z0-9_]+$ ]] || die "bad database name: $database"
	sql -e "CREATE DATABASE IF NOT EXISTS \`$database\`" || die "cannot create database $database on 127.0.0.1:$port"
	log "database $database exists on 127.0.0.1:$port"
}

start() {
	need_packages mariadbd:mariadb-server mariadb-install-db:mariadb-server mariadb:mariadb-client
	local pid
	if pid="$(our_pid "$data" mariadb mariadbd)"; then
		wait_for "mariadb on 127.0.0.1:$port" "$START_TIMEOUT" "$pid" "$(log_file "$data" mariadb)" answers
		log "already running (pid $pid, 127.0.0.1:$port)"
		create_db
		return 0
	fi
	if answers >/dev/null 2>&1; then
		log "127.0.0.1:$port already answers and is not ours: reusing it, will not stop it"
		create_db
		return 0
	fi
	local datadir="$data/mariadb" logf pf
	logf="$(log_file "$data" mariadb)"
	pf="$(pid_file "$data" mariadb)"
	mkdir -p "$data/pids" "$data/logs"
	if [[ ! -d "$datadir/mysql" ]]; then
		log "initialising $datadir"
		mkdir -p "$datadir"
		mariadb-install-db --datadir="$datadir" --auth-root-authentication-method=normal \
			--user=root --skip-test-db >>"$logf" 2>&1 ||
			{
				show_log "$logf"
				die "mariadb-install-db failed"
			}
	fi
	log "starting on 127.0.0.1:$port, data $datadir"
	# Run mariadbd itself (no mysqld_safe) so the pid is the server's. The pid
	# file option keeps it off /run/mysqld, which may not exist without systemd.
	# Own session: a Ctrl-C in the terminal must not reach it; we stop it by pid.
	setsid nohup mariadbd --datadir="$datadir" --port="$port" --bind-address=127.0.0.1 \
		--socket="$data/mysqld.sock" --pid-file="$data/mariadb/mariadbd.pid" --user=root \
		--skip-name-resolve --innodb-flush-log-at-trx-commit=2 --max-connections=500 \
		>>"$logf" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$pf"
	wait_for "mariadb on 127.0.0.1:$port" "$START_TIMEOUT" "$pid" "$logf" answers
	log "ready (pid $pid)"
	create_db
}

case "$action" in
start) start ;;
stop) stop_pid "$data" mariadb mariadbd ;;
*) die "usage: $0 start|stop DATA PORT [DATABASE]" ;;
esac
