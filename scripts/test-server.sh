#!/usr/bin/env bash
# The e2e suite and the runbook test against the production-shaped Temporal
# (scripts/temporal-server.sh: PostgreSQL, SQL visibility, 8 history
# shards) on test services of their own (.data/test-server, other ports),
# stopped at the end; then chaos seed 1 (SECKILL_TEST_CHAOS_SEEDS) on a
# server of its own (test/chaos/results/server-<seed>.md). Not part of `test`:
# the server's first build takes about 6 minutes.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=test-server
cd "$ROOT"

export SECKILL_TEMPORAL=server
export SECKILL_TEST_DATA="$ROOT/.data/test-server"
export SECKILL_TEST_REDIS_PORT="${SECKILL_TEST_REDIS_PORT:-16391}"
export SECKILL_TEST_MYSQL_PORT="${SECKILL_TEST_MYSQL_PORT:-13316}"
export SECKILL_TEST_TEMPORAL_PORT="${SECKILL_TEST_TEMPORAL_PORT:-17533}"
rc=0
trap '"$ROOT/scripts/services.sh" down test || true' EXIT
"$ROOT/scripts/services.sh" up test
export SECKILL_TEST_REDIS_ADDR="127.0.0.1:$SECKILL_TEST_REDIS_PORT"
export SECKILL_TEST_MYSQL_DSN="root@tcp(127.0.0.1:$SECKILL_TEST_MYSQL_PORT)/seckill_test"
export SECKILL_TEST_TEMPORAL_ADDRESS="127.0.0.1:$SECKILL_TEST_TEMPORAL_PORT"
log "go test: e2e and the runbook on Temporal 127.0.0.1:$SECKILL_TEST_TEMPORAL_PORT (${SECKILL_TEMPORAL_SHARDS:-8} shards, PostgreSQL)"
go test -count=1 -timeout 20m ./test/e2e/ || rc=1
go test -count=1 -timeout 10m -run 'TestRunbookCommands' ./test/ops/ || rc=1
"$ROOT/scripts/services.sh" down test || true
go build -o bin/seckill ./cmd/seckill
go build -o bin/seckill-chaos ./cmd/seckill-chaos
for seed in ${SECKILL_TEST_CHAOS_SEEDS:-1}; do
	log "chaos seed $seed on the production-shaped Temporal"
	./bin/seckill-chaos -seed "$seed" -duration 3m -seckill bin/seckill -temporal "$SECKILL_TEMPORAL_BIN" \
		-temporal-server "$ROOT/scripts/temporal-server.sh" -out test/chaos/results || rc=1
done
((rc == 0)) && log "passed" || log "FAILED"
exit "$rc"
