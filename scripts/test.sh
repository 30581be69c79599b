#!/usr/bin/env bash
# Everything CI runs: the test services on their own ports, go vet, then all
# tests in one `go test`. The services this run started are stopped at the
# end, also on failure or interruption; ones that were already serving are
# left alone.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG="test"
cd "$ROOT"

# step NAME CMD...: runs CMD and prints its wall time.
step() {
	local name="$1" start=$SECONDS rc=0
	shift
	log "== $name"
	"$@" || rc=$?
	if ((rc == 0)); then
		log "== $name: $((SECONDS - start))s"
	else
		log "== $name: $((SECONDS - start))s, FAILED (exit $rc)"
	fi
	return "$rc"
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	step "stop test services" "$ROOT/scripts/services.sh" down test || rc=1
	log "total: $((SECONDS - total_start))s, exit $rc"
	exit "$rc"
}

# disk_room: the run needs a few GiB (services' data, a chaos run's several
# hundred MiB, the build cache); a full disk fails it far from the cause.
disk_room() {
	local dir free
	for dir in "$ROOT" "${TMPDIR:-/tmp}"; do
		free=$(df -Pk "$dir" | awk 'NR == 2 { print int($4 / 1048576) }')
		log "$dir: ${free} GiB free"
		((free >= 3)) || die "$dir has ${free} GiB free; the tests need 3 GiB (go clean -cache, old temp dirs)"
	done
}

total_start=$SECONDS
trap_exits cleanup

step "disk" disk_room

step "start test services" "$ROOT/scripts/services.sh" up test
# The storefront's browser test (e2e) drives Debian's Chromium headless.
step "browser" need_packages chromium:chromium
# internal/testkit/redisnode's Sentinel group (in its tests and
# internal/conn's)
# runs Debian's redis-sentinel, and fails without it.
step "redis-sentinel" need_packages redis-sentinel:redis-sentinel
# internal/testkit/galera's cluster (its tests and test/faults'
# failovers): Galera, the rsync of a joining node's state transfer (whose
# script finds its port with ss), HAProxy in front, and nft to cut a
# node's network.
step "galera" need_packages /usr/lib/galera/libgalera_smm.so:galera-4 rsync:rsync ss:iproute2 haproxy:haproxy nft:nftables
# ops.TestPromtoolRules checks and unit-tests the alert rules with promtool.
step "promtool" need_packages promtool:prometheus
# internal/altcha is checked against altcha-lib, the ALTCHA reference
# library, under Debian's Node (the lock file pins it; npm's registry).
altcha_lib() {
	need_packages node:nodejs npm:npm || return
	# Node trusts its own CA list, not the system's: where the registry is
	# reached through a proxy whose CA only the system bundle holds, npm
	# fails with SELF_SIGNED_CERT_IN_CHAIN unless Node is given the bundle.
	if [[ -z "${NODE_EXTRA_CA_CERTS:-}" && -r /etc/ssl/certs/ca-certificates.crt ]]; then
		export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
	fi
	[ -d internal/altcha/testdata/node/node_modules/altcha-lib ] ||
		npm ci --no-audit --no-fund --prefix internal/altcha/testdata/node
}
step "altcha-lib" altcha_lib

export SECKILL_TEST_REDIS_ADDR="127.0.0.1:${SECKILL_TEST_REDIS_PORT:-16379}"
export SECKILL_TEST_MYSQL_DSN="root@tcp(127.0.0.1:${SECKILL_TEST_MYSQL_PORT:-13306})/seckill_test"
export SECKILL_TEST_TEMPORAL_ADDRESS="127.0.0.1:${SECKILL_TEST_TEMPORAL_PORT:-17233}"
# SECKILL_TEMPORAL_BIN: the CLI lib.sh named and the services started (the
# caller's, else the repository's build), so the tests restart the same one.
export SECKILL_TEMPORAL_BIN
export SECKILL_FAULTS_SUMMARY="$ROOT/.data/test/faults-summary.txt"
mkdir -p "$(dirname "$SECKILL_FAULTS_SUMMARY")"
rm -f "$SECKILL_FAULTS_SUMMARY"

step "gofmt" bash -c 'files=$(gofmt -l $(git ls-files "*.go")); [ -z "$files" ] || { echo "gofmt would change: $files"; exit 1; }'
step "go vet" go vet ./...
step "staticcheck" go tool staticcheck ./...
# One invocation over all packages (SECKILL_TEST_PKGS narrows it, e.g.
# ./test/faults/...); go test prints each package's time.
# shellcheck disable=SC2086 # the package list is split on purpose
step "go test" go test -count=1 -timeout 30m ${SECKILL_TEST_RUN:+-run "$SECKILL_TEST_RUN"} ${SECKILL_TEST_PKGS:-./...}
if [ -f "$SECKILL_FAULTS_SUMMARY" ]; then
	log "fault suite summary:"
	cat "$SECKILL_FAULTS_SUMMARY"
fi
# The seeded chaos runs (scripts/chaos.sh) on their own services: fixed
# seeds, 3 minutes each, about 9 minutes each with the quiet period and the
# checker. SECKILL_TEST_CHAOS_SEEDS picks others ("none" for a quick local
# run); reports go to .data/test/chaos/<seed>.md.
chaos_seeds="${SECKILL_TEST_CHAOS_SEEDS:-1 3}"
if [ "$chaos_seeds" != none ]; then
	for seed in $chaos_seeds; do
		step "chaos seed $seed" "$ROOT/scripts/chaos.sh" -seed "$seed" -duration 3m -out "$ROOT/.data/test/chaos"
	done
fi
