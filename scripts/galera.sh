#!/usr/bin/env bash
# Our own replicated MariaDB (SECKILL_DB=galera): scripts/galera.sh start|stop DATA PORT [DATABASE]
#   A three-node Galera cluster behind HAProxy, the shape of
#   docs/deploy.md's "Replicated database", with the settings of the
#   tests' clusters (internal/testkit/galera): node N (data DATA/galera-N)
#   serves clients on PORT+N, its group communication on PORT+100+N, its
#   state transfers on PORT+200+N (incremental) and PORT+300+N (rsync);
#   galera-check answers HAProxy's health check of node N on PORT+400+N;
#   HAProxy listens on PORT, the cluster's one address, and sends every
#   client to node 1 while it is Synced, else to the first Synced backup.
# start bootstraps the cluster from the node that may (the last one
# stopped; node 1 when the cluster is new) and joins the others to it.
# stop stops HAProxy, the check, then nodes 3, 2, 1: node 1, stopped last,
# bootstraps the next start.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=galera

[[ $# -eq 3 || $# -eq 4 ]] || die "usage: $0 start|stop DATA PORT [DATABASE]"
action="$1"
data="$(abs "$2")"
port="$3"
database="${4:-seckill}"

# The provider options every node shares: internal/testkit/galera.Tuning
# (TestTheScriptKeepsTheTuning).
tuning="gcache.size=64M;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT6S"
check_bin="$ROOT/.data/bin/galera-check"

gcomm_port() { echo $((port + 100 + $1)); }
check_port() { echo $((port + 400 + $1)); }
node_dir() { echo "$data/galera-$1"; }

sql() {
	local p="$1"
	shift
	mariadb -h127.0.0.1 -P"$p" -uroot --connect-timeout=3 "$@"
}
answers() { sql "$1" -e 'select 1'; }
synced() { [[ "$(sql "$1" -N -e "SHOW STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | cut -f2)" == Synced ]]; }

# node_user: the nodes' account. Root runs them as Debian's mysql: the
# rsync daemon of a state transfer started by root runs as nobody and
# cannot write a root-owned data directory.
node_user() {
	if ((EUID == 0)) && id mysql >/dev/null 2>&1; then echo mysql; else id -un; fi
}

# start_node N [ARG...]: our node N, started with ARGs, once Synced.
start_node() {
	local i="$1" pid
	shift
	local name="galera-$i" nport=$((port + i)) dir logf pf
	dir="$(node_dir "$i")"
	logf="$(log_file "$data" "$name")"
	if pid="$(our_pid "$data" "$name" mariadbd)"; then
		wait_for "$name Synced on 127.0.0.1:$nport" "$START_TIMEOUT" "$pid" "$logf" synced "$nport"
		log "$name already running (pid $pid, 127.0.0.1:$nport)"
		return 0
	fi
	answers "$nport" >/dev/null 2>&1 && die "127.0.0.1:$nport already answers and is not ours: the cluster needs its own nodes"
	pf="$(pid_file "$data" "$name")"
	mkdir -p "$dir/data" "$data/pids" "$data/logs"
	if ((i == 1)) && [[ ! -d "$dir/data/mysql" ]]; then
		log "initialising $dir/data"
		mariadb-install-db --datadir="$dir/data" --auth-root-authentication-method=normal \
			--user="$(node_user)" --skip-test-db >>"$logf" 2>&1 ||
			{
				show_log "$logf"
				die "mariadb-install-db failed"
			}
	fi
	chown -R "$(node_user):" "$dir"
	local peers="127.0.0.1:$(gcomm_port 1),127.0.0.1:$(gcomm_port 2),127.0.0.1:$(gcomm_port 3)"
	log "starting $name on 127.0.0.1:$nport $*"
	setsid nohup mariadbd --no-defaults --datadir="$dir/data" --port="$nport" --bind-address=127.0.0.1 \
		--socket="$dir/mysqld.sock" --pid-file="$dir/mariadbd.pid" --user="$(node_user)" \
		--skip-name-resolve --innodb-flush-log-at-trx-commit=2 --max-connections=500 --skip-log-bin \
		--wsrep-on=ON --wsrep-provider=/usr/lib/galera/libgalera_smm.so --wsrep-cluster-name=seckill \
		--wsrep-node-name="node-$i" --wsrep-cluster-address="gcomm://$peers" \
		--wsrep-node-address="127.0.0.1:$(gcomm_port "$i")" \
		--wsrep-provider-options="gmcast.listen_addr=tcp://127.0.0.1:$(gcomm_port "$i");ist.recv_addr=127.0.0.1:$((port + 200 + i));$tuning" \
		--wsrep-sst-method=rsync --wsrep-sst-receive-address="127.0.0.1:$((port + 300 + i))" \
		--binlog-format=ROW --innodb-autoinc-lock-mode=2 "$@" \
		>>"$logf" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$pf"
	wait_for "$name Synced on 127.0.0.1:$nport" "$START_TIMEOUT" "$pid" "$logf" synced "$nport"
	log "$name Synced (pid $pid)"
}

# bootstrap_node: the node a cluster with no node running starts from:
# the one its last shutdown marked safe to bootstrap, node 1 when the
# cluster is new. None (the cluster was not stopped cleanly): node 1 is
# marked, and what the others had committed after it is lost with it —
# development data.
bootstrap_node() {
	local i state
	for i in 1 2 3; do
		state="$(node_dir "$i")/data/grastate.dat"
		if grep -q '^safe_to_bootstrap: 1' "$state" 2>/dev/null; then
			echo "$i"
			return 0
		fi
	done
	state="$(node_dir 1)/data/grastate.dat"
	if [[ -f "$state" ]]; then
		log "no node was stopped last cleanly: bootstrapping node 1 anyway (development data)"
		sed -i 's/^safe_to_bootstrap: 0/safe_to_bootstrap: 1/' "$state"
	fi
	echo 1
}

start_check() {
	if our_pid "$data" galera-check galera-check >/dev/null; then
		return 0
	fi
	log "building $check_bin"
	(cd "$ROOT" && go build -o "$check_bin" ./internal/testkit/galera/cmd/galera-check) || die "building galera-check failed"
	local i pairs=()
	for i in 1 2 3; do
		pairs+=("127.0.0.1:$(check_port "$i")=127.0.0.1:$((port + i))")
	done
	setsid nohup "$check_bin" serve "${pairs[@]}" >>"$(log_file "$data" galera-check)" 2>&1 </dev/null &
	echo "$!" >"$(pid_file "$data" galera-check)"
	wait_for "galera-check of node 1" "$START_TIMEOUT" "$!" "$(log_file "$data" galera-check)" http_ok "http://127.0.0.1:$(check_port 1)/"
}

start_haproxy() {
	local pid cfg="$data/haproxy.cfg" logf i nodes=()
	logf="$(log_file "$data" haproxy)"
	if ! pid="$(our_pid "$data" haproxy haproxy)"; then
		for i in 1 2 3; do
			nodes+=("node-$i=127.0.0.1:$((port + i)),127.0.0.1:$(check_port "$i")")
		done
		"$check_bin" config "127.0.0.1:$port" "$data/haproxy.sock" "${nodes[@]}" >"$cfg"
		log "starting HAProxy on 127.0.0.1:$port (configuration $cfg)"
		setsid nohup haproxy -db -f "$cfg" >>"$logf" 2>&1 </dev/null &
		pid=$!
		echo "$pid" >"$(pid_file "$data" haproxy)"
	fi
	wait_for "HAProxy on 127.0.0.1:$port" "$START_TIMEOUT" "$pid" "$logf" answers "$port"
}

create_db() {
	[[ "$database" =~ ^[A-Za-z0-9_]+$ ]] || die "bad database name: $database"
	sql "$port" -e "CREATE DATABASE IF NOT EXISTS \`$database\`" || die "cannot create database $database through 127.0.0.1:$port"
	log "database $database exists; the cluster answers on 127.0.0.1:$port (HAProxy), nodes on $((port + 1))-$((port + 3))"
}

start() {
	need_packages mariadbd:mariadb-server mariadb-install-db:mariadb-server mariadb:mariadb-client \
		/usr/lib/galera/libgalera_smm.so:galera-4 rsync:rsync ss:iproute2 haproxy:haproxy curl:curl
	if ! our_pid "$data" haproxy haproxy >/dev/null && answers "$port" >/dev/null 2>&1; then
		die "127.0.0.1:$port already answers and is not our HAProxy: stop that server (go tool task down) or pick SECKILL_DB=single"
	fi
	local i running=0 boot
	for i in 1 2 3; do
		! our_pid "$data" "galera-$i" mariadbd >/dev/null || running=$((running + 1))
	done
	if ((running == 0)); then
		boot="$(bootstrap_node)"
		start_node "$boot" --wsrep-new-cluster
	fi
	for i in 1 2 3; do
		start_node "$i"
	done
	start_check
	start_haproxy
	create_db
}

# stop_ours NAME PATTERN: stops our NAME if we started one.
stop_ours() { [[ ! -f "$(pid_file "$data" "$1")" ]] || stop_pid "$data" "$1" "$2"; }

stop() {
	stop_ours haproxy haproxy
	stop_ours galera-check galera-check
	local i
	for i in 3 2 1; do
		stop_ours "galera-$i" mariadbd
	done
}

case "$action" in
start) start ;;
stop) stop ;;
*) die "usage: $0 start|stop DATA PORT [DATABASE]" ;;
esac
