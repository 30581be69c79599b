#!/usr/bin/env bash
# Bench scenario 12: the burst on the Temporal dev server and on the
# production-shaped server with 8 and with 1 history shards, in one run.
#   scripts/bench-temporal.sh [seckill-bench flags]
# The dev services (Redis, MariaDB, the dev server) as `bench` uses them;
# the two servers under .data/bench-server-{8,1} on ports 7533 and 7733 (each takes its port+0..3, +10, +20, +100..103),
# stopped at the end.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=bench-temporal
cd "$ROOT"

SECKILL_TEMPORAL=dev "$ROOT/scripts/services.sh" up dev
declare -A port=([8]=7533 [1]=7733)
stop_servers() {
	local s
	for s in "${!port[@]}"; do
		SECKILL_TEMPORAL_SHARDS=$s "$ROOT/scripts/temporal-server.sh" stop ".data/bench-server-$s" "${port[$s]}" || true
	done
}
trap stop_servers EXIT
for s in 8 1; do
	SECKILL_TEMPORAL_SHARDS=$s "$ROOT/scripts/temporal-server.sh" start ".data/bench-server-$s" "${port[$s]}"
done
go build -buildvcs=auto -o bin/seckill ./cmd/seckill
go build -o bin/seckill-bench ./cmd/seckill-bench
./bin/seckill-bench -seckill bin/seckill -out test/bench/results/temporal \
	-temporal-stacks dev=127.0.0.1:7233,server-8=127.0.0.1:7533,server-1=127.0.0.1:7733 "$@"
