#!/usr/bin/env bash
# The seeded chaos run: scripts/chaos.sh [seckill-chaos flags]
# Starts its own Redis, MariaDB and Temporal dev server on free ports under
# a temp dir (never the test or dev services), two APIs and two workers,
# and writes test/chaos/results/<seed>.md and .png. Exit 1: an invariant broke.
# -redis cluster: a three-master Redis Cluster instead of one redis-server
# (test/chaos/results/cluster-<seed>.md and .png). -db galera: a three-node
# Galera cluster behind HAProxy instead of one mariadbd, with the database
# failover faults (galera-<seed>.md and .png; a cut takes root).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=chaos
cd "$ROOT"

need_packages redis-server:redis-server mariadbd:mariadb-server mariadb-install-db:mariadb-server
# The Galera cluster's programs, as scripts/test.sh installs them.
prev=""
for arg in "$@"; do
	if [[ "$arg" == "-db=galera" || "$arg" == "--db=galera" || ("$arg" == galera && ("$prev" == -db || "$prev" == --db)) ]]; then
		need_packages /usr/lib/galera/libgalera_smm.so:galera-4 rsync:rsync ss:iproute2 haproxy:haproxy nft:nftables
	fi
	prev="$arg"
done
bin="$SECKILL_TEMPORAL_BIN"
build_tool "$bin" "$ROOT/temporal-dev" github.com/temporalio/cli/cmd/temporal
go build -o bin/seckill ./cmd/seckill
go build -o bin/seckill-chaos ./cmd/seckill-chaos
# Fixed seed and length unless the caller says otherwise (later flags win).
exec ./bin/seckill-chaos -seed 1 -duration 3m -seckill bin/seckill -temporal "$bin" -out test/chaos/results "$@"
