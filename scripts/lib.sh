# shellcheck shell=bash
# Shared helpers of the service scripts. Sourced, never run.
#
# Conventions: every service keeps its data, log and pid file under a data
# folder DATA (".data" for `task up`, ".data/test" for `task test`):
#   DATA/pids/NAME.pid   the pid of a process WE started (absent: not ours)
#   DATA/logs/NAME.log   its output
# A service that answers on its port without a pid file of ours is reused
# and never stopped.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export ROOT

# Bounds of the readiness and stop waits, in seconds.
export START_TIMEOUT="${SECKILL_START_TIMEOUT:-120}"
export STOP_TIMEOUT="${SECKILL_STOP_TIMEOUT:-30}"

# The Temporal CLI (its dev server and operator commands), built once from
# temporal-dev/go.mod.
export SECKILL_TEMPORAL_BIN="${SECKILL_TEMPORAL_BIN:-$ROOT/.data/bin/temporal}"

# The Sentinel shape of our Redis (SECKILL_REDIS=sentinel, scripts/redis.sh)
# on base port PORT: the master on PORT, its replica on PORT+1, three
# sentinels on PORT+20000 to PORT+20002 monitoring it as SENTINEL_MASTER.
export SENTINEL_MASTER=seckill
# sentinel_port PORT I: the port of sentinel I (0 to 2).
sentinel_port() { echo $(($1 + 20000 + $2)); }
# sentinel_addrs PORT: the sentinels' addresses, as REDIS_SENTINELS.
sentinel_addrs() { echo "127.0.0.1:$(sentinel_port "$1" 0),127.0.0.1:$(sentinel_port "$1" 1),127.0.0.1:$(sentinel_port "$1" 2)"; }

log() { printf '%s [%s] %s\n' "$(date -u +%H:%M:%S)" "${LOG_TAG:-seckill}" "$*" >&2; }

die() {
	log "ERROR: $*"
	exit 1
}

# show_log FILE: the tail of a service's log, for a failure message.
show_log() {
	local f="$1"
	if [[ -s "$f" ]]; then
		log "last lines of $f:"
		tail -n 30 "$f" >&2 || true
	else
		log "($f is empty or missing)"
	fi
}

pid_file() { echo "$1/pids/$2.pid"; }
log_file() { echo "$1/logs/$2.log"; }

# alive PID [PATTERN]: the process runs and, when PATTERN is given, its
# command line contains it (guards against a recycled pid).
alive() {
	local pid="$1" pattern="${2:-}"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	# A zombie is not alive for our purposes.
	if [[ -r "/proc/$pid/stat" ]]; then
		local state
		state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)"
		[[ "$state" != "Z" ]] || return 1
	fi
	if [[ -n "$pattern" && -r "/proc/$pid/cmdline" ]]; then
		tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$pattern" || return 1
	fi
	return 0
}

# our_pid DATA NAME PATTERN: prints the pid of our running NAME, or fails
# (and removes a stale pid file).
our_pid() {
	local pf pid
	pf="$(pid_file "$1" "$2")"
	[[ -f "$pf" ]] || return 1
	pid="$(tr -d '[:space:]' <"$pf")"
	if alive "$pid" "$3"; then
		echo "$pid"
		return 0
	fi
	rm -f "$pf"
	return 1
}

# wait_for DESC TIMEOUT PID LOGFILE CMD...: polls CMD until it succeeds.
# Fails early if PID (when non-empty) exits, and after TIMEOUT seconds; both
# failures print the tail of LOGFILE.
wait_for() {
	local desc="$1" timeout="$2" pid="$3" logf="$4"
	shift 4
	local deadline=$((SECONDS + timeout)) delay=0.1
	until "$@" >/dev/null 2>&1; do
		if [[ -n "$pid" ]] && ! alive "$pid"; then
			show_log "$logf"
			die "$desc: the process (pid $pid) exited before it was ready"
		fi
		if ((SECONDS >= deadline)); then
			show_log "$logf"
			die "$desc: not ready after ${timeout}s"
		fi
		sleep "$delay"
		# Back off to at most half a second between polls.
		[[ "$delay" == 0.5 ]] || delay="$(awk -v d="$delay" 'BEGIN{d*=2; if (d>0.5) d=0.5; print d}')"
	done
}

# stop_pid DATA NAME PATTERN: stops our NAME by its pid file: SIGTERM, a
# bounded wait, then SIGKILL.
stop_pid() {
	local data="$1" name="$2" pattern="$3" pid
	if ! pid="$(our_pid "$data" "$name" "$pattern")"; then
		log "no running process of ours under $data: nothing to stop (a server we did not start is left alone)"
		return 0
	fi
	log "stopping pid $pid"
	kill -TERM "$pid" 2>/dev/null || true
	local deadline=$((SECONDS + STOP_TIMEOUT))
	while alive "$pid"; do
		if ((SECONDS >= deadline)); then
			log "still running after ${STOP_TIMEOUT}s; sending SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
			local kdeadline=$((SECONDS + 10))
			while alive "$pid"; do
				((SECONDS < kdeadline)) || die "$name: pid $pid survived SIGKILL"
				sleep 0.1
			done
			break
		fi
		sleep 0.1
	done
	rm -f "$(pid_file "$data" "$name")"
	log "stopped"
}

# need_packages BIN:PACKAGE...: installs the Debian packages of missing
# binaries (no systemd here: we run the servers ourselves). A BIN that is
# an absolute path names a file (a library) the package provides.
need_packages() {
	local pkgs=() spec need
	for spec in "$@"; do
		need="${spec%%:*}"
		if [[ "$need" == /* ]]; then
			[[ -e "$need" ]] || pkgs+=("${spec#*:}")
		else
			command -v "$need" >/dev/null 2>&1 || pkgs+=("${spec#*:}")
		fi
	done
	((${#pkgs[@]} > 0)) || return 0
	# Deduplicate (several binaries come from one package).
	mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | sort -u)
	command -v apt-get >/dev/null 2>&1 || die "missing ${pkgs[*]} and no apt-get to install them"
	local sudo=()
	((EUID == 0)) || sudo=(sudo)
	log "installing ${pkgs[*]} with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	# Keep the packages' init scripts from starting system-wide servers on
	# our ports: a policy-rc.d answering 101 forbids it, for the install only.
	local policy=/usr/sbin/policy-rc.d added=""
	if [[ ! -e "$policy" ]]; then
		printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
		"${sudo[@]}" chmod 755 "$policy"
		added=1
	fi
	# Redis, MariaDB and Temporal start in parallel, so two installs may
	# race for apt's locks: one install at a time (flock), and apt itself
	# waits for a lock held by anyone else instead of failing at once.
	local rc=0
	{
		"${sudo[@]}" flock -w 600 /tmp/seckill-apt.lock \
			bash -c 'apt-get -o DPkg::Lock::Timeout=600 update -q &&
				apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "$@"' _ "${pkgs[@]}"
	} || rc=$?
	[[ -z "$added" ]] || "${sudo[@]}" rm -f "$policy"
	((rc == 0)) || die "apt-get could not install ${pkgs[*]} (exit $rc)"
}

# build_tool BIN MODDIR PKG [VAR=VALUE...]: builds PKG of the module pinned
# in MODDIR (a go.mod of its own) into BIN, once: nothing when BIN exists.
build_tool() {
	local bin="$1" dir="$2" pkg="$3"
	shift 3
	[[ -x "$bin" ]] && return 0
	log "building $bin from ${dir#"$ROOT"/}/go.mod (once; minutes the first time)"
	mkdir -p "$(dirname "$bin")"
	(cd "$dir" && env "$@" go build -o "$bin" "$pkg") || die "building $pkg failed"
}

# in_background DATA NAME DESC CMD...: runs CMD detached, at low priority
# and in its own process group (pid DATA/pids/NAME.pid, log
# DATA/logs/NAME.log), unless ours already runs. For a first build that
# must not hold up `up`: the caller goes on, and the built server joins
# when it answers.
in_background() {
	local data="$1" name="$2" desc="$3"
	shift 3
	our_pid "$data" "$name" "$1" >/dev/null && return 0
	mkdir -p "$data/pids" "$data/logs"
	local logf
	logf="$(log_file "$data" "$name")"
	log "$desc (log $logf)"
	setsid nohup nice -n 10 "$@" >>"$logf" 2>&1 </dev/null &
	echo "$!" >"$(pid_file "$data" "$name")"
}

# stop_background DATA NAME PATTERN: ends what in_background started, its
# go build included (the whole process group).
stop_background() {
	local pid
	if pid="$(our_pid "$1" "$2" "$3")"; then
		log "stopping the background $2 (process group $pid)"
		kill -TERM -- "-$pid" 2>/dev/null || true
		rm -f "$(pid_file "$1" "$2")"
	fi
}

# trap_exits CLEANUP: runs CLEANUP on exit, and exits 130 on SIGINT and 143
# on SIGTERM (so CLEANUP runs then too).
trap_exits() {
	trap "$1" EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

# http_ok URL: the URL answers 200 within 2 s.
http_ok() { [[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$1")" == 200 ]]; }

# abs PATH: PATH made absolute against the repository root.
abs() {
	case "$1" in
	/*) echo "$1" ;;
	*) echo "$ROOT/$1" ;;
	esac
}
