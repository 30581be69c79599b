#!/usr/bin/env bash
# Our own Redis: scripts/redis.sh start|stop DATA PORT [single|sentinel]
#   single (default): one redis-server on PORT.
#   sentinel: a Sentinel group (sentinel_port and SENTINEL_MASTER in
#   lib.sh): the master on PORT, its replica on PORT+1, three
#   redis-sentinel processes on PORT+20000 to PORT+20002 monitoring it.
# stop stops whichever of them runs: the sentinels first, so none fails
# the master over while the nodes stop.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=redis

[[ $# -eq 3 || $# -eq 4 ]] || die "usage: $0 start|stop DATA PORT [single|sentinel]"
action="$1"
data="$(abs "$2")"
port="$3"
shape="${4:-single}"

ping() { [[ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" == PONG ]]; }
link_up() { redis-cli -h 127.0.0.1 -p "$1" info replication 2>/dev/null | grep -q '^master_link_status:up'; }

# start_node NAME PORT [ARG...]: our redis-server NAME (data DATA/NAME) on
# PORT with the product's durability settings and ARGs.
start_node() {
	local name="$1" nport="$2" pid
	shift 2
	if pid="$(our_pid "$data" "$name" redis-server)"; then
		wait_for "$name on 127.0.0.1:$nport" "$START_TIMEOUT" "$pid" "$(log_file "$data" "$name")" ping "$nport"
		log "$name already running (pid $pid, 127.0.0.1:$nport)"
		return 0
	fi
	mkdir -p "$data/$name" "$data/pids" "$data/logs"
	local pf logf
	pf="$(pid_file "$data" "$name")"
	logf="$(log_file "$data" "$name")"
	rm -f "$pf"
	log "starting $name on 127.0.0.1:$nport, data $data/$name"
	# Redis daemonizes itself and writes the daemon's pid to the pid file.
	redis-server --port "$nport" --bind 127.0.0.1 --dir "$data/$name" \
		--appendonly yes --appendfsync everysec --maxmemory-policy noeviction --save '' \
		--daemonize yes --pidfile "$pf" --logfile "$logf" "$@" ||
		{
			show_log "$logf"
			die "redis-server failed to start"
		}
	wait_for "$name pid file" "$START_TIMEOUT" "" "$logf" test -s "$pf"
	pid="$(tr -d '[:space:]' <"$pf")"
	wait_for "$name on 127.0.0.1:$nport" "$START_TIMEOUT" "$pid" "$logf" ping "$nport"
	log "$name ready (pid $pid)"
}

start_single() {
	need_packages redis-server:redis-server redis-cli:redis-tools
	if ! our_pid "$data" redis redis-server >/dev/null && ping "$port"; then
		log "127.0.0.1:$port already answers and is not ours: reusing it, will not stop it"
		return 0
	fi
	start_node redis "$port"
}

# sentinel_conf I: the configuration file of sentinel I (1 to 3).
sentinel_conf() { echo "$data/redis-sentinel-$1/sentinel.conf"; }

# group_master: the port of the group's master, as a running sentinel
# names it, else as the last sentinel configuration file does (a sentinel
# rewrites its file at a failover), else PORT.
group_master() {
	local i answer
	for i in 0 1 2; do
		answer="$(redis-cli -h 127.0.0.1 -p "$(sentinel_port "$port" "$i")" sentinel get-master-addr-by-name "$SENTINEL_MASTER" 2>/dev/null | sed -n 2p)"
		[[ -z "$answer" ]] || {
			echo "$answer"
			return 0
		}
	done
	for i in 1 2 3; do
		answer="$(awk -v m="$SENTINEL_MASTER" '$1 == "sentinel" && $2 == "monitor" && $3 == m { print $5 }' "$(sentinel_conf "$i")" 2>/dev/null || true)"
		[[ -z "$answer" ]] || {
			echo "$answer"
			return 0
		}
	done
	echo "$port"
}

# start_sentinel I MASTER_PORT: our sentinel I. Its configuration file,
# which it rewrites with what it learns, is kept across restarts; a new
# one monitors the master on MASTER_PORT.
start_sentinel() {
	local i="$1" master_port="$2" sport name pid
	sport="$(sentinel_port "$port" $((i - 1)))"
	name="redis-sentinel-$i"
	if pid="$(our_pid "$data" "$name" sentinel)"; then
		log "$name already running (pid $pid, 127.0.0.1:$sport)"
		return 0
	fi
	ping "$sport" && die "127.0.0.1:$sport already answers and is not ours: the Sentinel group needs its own sentinels"
	local dir="$data/$name" pf logf conf
	pf="$(pid_file "$data" "$name")"
	logf="$(log_file "$data" "$name")"
	conf="$(sentinel_conf "$i")"
	mkdir -p "$dir" "$data/pids" "$data/logs"
	rm -f "$pf"
	if [[ ! -s "$conf" ]]; then
		# A master unanswering for 5 s is down; two sentinels must agree.
		cat >"$conf" <<-CONF
			port $sport
			bind 127.0.0.1
			dir $dir
			sentinel monitor $SENTINEL_MASTER 127.0.0.1 $master_port 2
			sentinel down-after-milliseconds $SENTINEL_MASTER 5000
			sentinel failover-timeout $SENTINEL_MASTER 30000
			sentinel parallel-syncs $SENTINEL_MASTER 1
		CONF
	fi
	log "starting $name on 127.0.0.1:$sport (configuration $conf)"
	# In the foreground of a session of its own, so that its pid is ours
	# at once and a start that fails (a port taken) is seen as an exit.
	setsid nohup redis-sentinel "$conf" >>"$logf" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$pf"
	wait_for "$name on 127.0.0.1:$sport" "$START_TIMEOUT" "$pid" "$logf" ping "$sport"
}

# sentinel_ready SPORT: the sentinel sees the master, one replica and the
# two other sentinels, so that it can take part in a failover.
sentinel_ready() {
	redis-cli -h 127.0.0.1 -p "$1" sentinel master "$SENTINEL_MASTER" 2>/dev/null | awk '
		prev == "flags" { flags = $0 } prev == "num-slaves" { slaves = $0 } prev == "num-other-sentinels" { others = $0 }
		{ prev = $0 }
		END { exit !(flags == "master" && slaves == 1 && others == 2) }'
}

start_sentinel_group() {
	need_packages redis-server:redis-server redis-cli:redis-tools redis-sentinel:redis-sentinel
	local master_port node_port name i
	master_port="$(group_master)"
	# The master first: its replica waits for its link to it.
	for node_port in "$master_port" $((2 * port + 1 - master_port)); do
		name=redis
		[[ "$node_port" == "$port" ]] || name=redis-replica
		if ! our_pid "$data" "$name" redis-server >/dev/null && ping "$node_port"; then
			die "127.0.0.1:$node_port already answers and is not ours: the Sentinel group needs its own nodes (go tool task down, or stop it)"
		fi
		if [[ "$node_port" == "$master_port" ]]; then
			start_node "$name" "$node_port" --repl-diskless-sync-delay 0
		else
			start_node "$name" "$node_port" --repl-diskless-sync-delay 0 --replicaof 127.0.0.1 "$master_port"
			wait_for "$name's link to its master 127.0.0.1:$master_port" "$START_TIMEOUT" "" "$(log_file "$data" "$name")" link_up "$node_port"
		fi
	done
	for i in 1 2 3; do
		start_sentinel "$i" "$master_port"
	done
	for i in 1 2 3; do
		wait_for "redis-sentinel-$i to see the master, the replica and the other sentinels" "$START_TIMEOUT" "" \
			"$(log_file "$data" "redis-sentinel-$i")" sentinel_ready "$(sentinel_port "$port" $((i - 1)))"
	done
	log "Sentinel group ready: master 127.0.0.1:$master_port (\"$SENTINEL_MASTER\"), sentinels $(sentinel_addrs "$port")"
}

stop_all() {
	local i
	for i in 3 2 1; do
		[[ ! -f "$(pid_file "$data" "redis-sentinel-$i")" ]] || stop_pid "$data" "redis-sentinel-$i" sentinel
	done
	[[ ! -f "$(pid_file "$data" redis-replica)" ]] || stop_pid "$data" redis-replica redis-server
	stop_pid "$data" redis redis-server
}

case "$action:$shape" in
start:single) start_single ;;
start:sentinel) start_sentinel_group ;;
stop:*) stop_all ;;
*) die "usage: $0 start|stop DATA PORT [single|sentinel]" ;;
esac
